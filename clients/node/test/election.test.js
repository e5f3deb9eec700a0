// The Election (etcd's concurrency.Election semantics, as the Go and Python
// clients' Election), a fresh leader() after a hand-over, and close() that
// returns once the agent released: against the real agent over real
// redis-servers.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Election, NoLeader, NotLeader, connect } from '../index.js';
import { startCluster } from './cluster.js';

const BOUNDED = { timeout: 60000 };

let cluster;
const clients = [];
before(async () => { cluster = await startCluster(); });
after(async () => {
  await Promise.all(clients.map((c) => c.close()));
  await cluster.stop();
});

async function dial() {
  const c = await connect({ path: cluster.socket, clientName: 'node-elect' });
  clients.push(c);
  return c;
}

/** Waits until the agent has n waiting LOCKs (STATUS is all there is to watch). */
async function awaitWaiters(client, n) {
  const deadline = Date.now() + 10000;
  while ((await client.status()).waiters < n) {
    if (Date.now() > deadline) throw new Error(`the agent never had ${n} waiters`);
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
}

test('a fresh leader() after a hand-over names the new leader (issue 31)', BOUNDED, async () => {
  const [watcher, asker, a, b] = await Promise.all([dial(), dial(), dial(), dial()]);
  const stop = new AbortController();
  await watcher.observe('node/handover', { signal: stop.signal });
  let lead = await a.campaign('node/handover', 'first');
  const candidates = [a, b];
  const stale = [];
  for (let i = 0; i < 20; i++) {
    const elected = candidates[1].campaign('node/handover', `c${i}`);
    await awaitWaiters(asker, 1);
    await lead.unlock();
    const next = await elected;
    const got = await asker.leader('node/handover');
    if (got.fence !== next.fence) stale.push([i, got.fence, got.none]);
    lead = next;
    candidates.reverse();
  }
  stop.abort();
  assert.deepEqual(stale, [], 'a fresh leader() named a term that had ended');
});

test('close() returns once the agent released every lock (issue 31)', BOUNDED, async () => {
  const asker = await dial();
  let held = 0;
  for (let i = 0; i < 20; i++) {
    const c = await connect({ path: cluster.socket, clientName: 'node-close' });
    const names = [0, 1, 2, 3, 4].map((j) => `node/close${i}/${j}`);
    for (const n of names) await c.lock(n);
    await c.close();
    for (const n of names) held += (await asker.who(n)).length;
  }
  assert.equal(held, 0, 'after close() resolved, WHO found locks still held');
});

test('Election: etcd semantics (no leader, resign twice, campaign again, proclaim)', BOUNDED, async () => {
  const c = await dial();
  const e = new Election(c, 'node/semantics');
  await assert.rejects(e.leader(), NoLeader);
  assert.equal((await c.leader('node/semantics')).none, true); // the old call keeps its shape
  await e.resign(); // not leading: nothing to do
  await assert.rejects(e.proclaim('x'), NotLeader);
  assert.equal(e.rev, 0);
  await e.campaign('one');
  const rev = e.rev;
  assert.ok(rev > 0);
  await e.campaign('one'); // leading already: at once
  await e.campaign('two'); // leading already: proclaims
  assert.equal(e.rev, rev);
  let got = await e.leader();
  assert.deepEqual([got.fence, got.value], [rev, 'two']);
  await e.proclaim('three');
  assert.equal((await new Election(await dial(), 'node/semantics').leader()).value, 'three');
  await e.resign();
  await e.resign(); // a second resign is fine
  assert.equal(e.rev, 0);
  await assert.rejects(e.leader(), NoLeader);
  await assert.rejects(e.proclaim('four'), NotLeader);
  // etcd's TestElectionSessionRecampaign: two Elections of one name on one client are one candidate.
  const e1 = new Election(c, 'node/recampaign');
  await e1.campaign('abc');
  const e2 = new Election(c, 'node/recampaign');
  await e2.campaign('def');
  assert.equal(e2.rev, e1.rev);
  const stop = new AbortController();
  for await (const l of e1.observe({ signal: stop.signal })) {
    assert.deepEqual([l.value, l.fence], ['def', e1.rev]);
    break;
  }
  got = await e1.leader();
  assert.equal(got.value, 'def');
});

test("Election: etcd's ExampleElection_Campaign and TestElectionFailover", BOUNDED, async () => {
  const [c1, c2, c3] = await Promise.all([dial(), dial(), dial()]);
  const e1 = new Election(c1, 'node/example');
  const e2 = new Election(c2, 'node/example');
  await e1.campaign('e1');
  let won = false;
  const elected = e2.campaign('e2').then(() => { won = true; });
  await awaitWaiters(c3, 1);
  assert.equal(won, false);
  const rev1 = e1.rev;
  await e1.resign();
  await elected;
  assert.ok(e2.rev > rev1);
  assert.equal(e1.rev, 0);
  // Failover: e2's client closes while a third candidate waits; a new observer sees it first.
  const e3 = new Election(c3, 'node/example');
  const third = e3.campaign('e3');
  await awaitWaiters(c1, 1);
  await c2.close();
  const stop = new AbortController();
  for await (const l of new Election(c1, 'node/example').observe({ signal: stop.signal })) {
    assert.equal(l.value, 'e3');
    break;
  }
  await third;
});
