// Elections, values, wanted notices and CHECK against the real agent (as
// clients/go/coordination_test.go).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { NotHeld, connect } from '../index.js';
import { startCluster } from './cluster.js';

// A client that misses an event fails the test instead of hanging it.
const BOUNDED = { timeout: 30000 };

let cluster;
const clients = [];
before(async () => { cluster = await startCluster(); });
after(async () => {
  await Promise.all(clients.map((c) => c.close()));
  await cluster.stop();
});

async function dial() {
  const c = await connect({ path: cluster.socket, clientName: 'node-coord' });
  clients.push(c);
  return c;
}

/** The next leader an observer sees, within 10 s. */
async function next(leaders) {
  const r = await Promise.race([leaders.next(), new Promise((_, reject) => {
    setTimeout(() => reject(new Error('no leader pushed within 10s')), 10000).unref();
  })]);
  assert.ok(!r.done, 'the observation ended');
  return r.value;
}

test('campaign, observe, proclaim, leader, resign: observers see every term in order', BOUNDED, async () => {
  const [first, second, observer] = await Promise.all([dial(), dial(), dial()]);
  const stop = new AbortController();
  const leaders = (await observer.observe('node/election', { signal: stop.signal }))[Symbol.asyncIterator]();
  let l = await next(leaders);
  assert.equal(l.none, true);
  assert.equal(l.name, 'node/election');

  const l1 = await first.campaign('node/election', 'first: ü 1');
  l = await next(leaders);
  assert.deepEqual([l.fence, l.value, l.none], [l1.fence, 'first: ü 1', false]);
  assert.ok(l.agent);

  const elected = second.campaign('node/election', 'second');
  await l1.proclaim('first:3');
  assert.equal(l1.value, 'first:3');
  l = await next(leaders);
  assert.deepEqual([l.fence, l.value], [l1.fence, 'first:3']);
  const now = await second.leader('node/election');
  assert.deepEqual([now.fence, now.value], [l1.fence, 'first:3']);

  await l1.unlock();
  const l2 = await elected;
  l = await next(leaders);
  if (l.none) l = await next(leaders); // the moment between the two terms may be seen, or not
  assert.deepEqual([l.fence, l.value], [l2.fence, 'second']);
  assert.ok(l2.fence > l1.fence);
  await assert.rejects(l1.proclaim('late'), NotHeld);
  await l2.unlock();

  stop.abort();
  for (;;) if ((await leaders.next()).done) break; // ends once the signal aborted
});

test('values of any text round-trip through the agent', BOUNDED, async () => {
  const c = await dial();
  for (const value of ['http://h:1/p?q=1&r=2', '{"a": [1, "ü"]}', '100% 🔒']) {
    const lock = await c.lock('node/value', { value });
    assert.equal((await c.who('node/value'))[0].value, value);
    await lock.unlock();
  }
});

test('check answers whether a fence is current', BOUNDED, async () => {
  const c = await dial();
  const lock = await c.lock('node/check');
  assert.equal(await c.check('node/check', lock.fence), true);
  assert.equal(await c.check('node/check', BigInt(lock.fence) + 1n), false);
  await lock.unlock();
  assert.equal(await c.check('node/check', lock.fence), false);
});

test('a notifyWanted holder hears of a conflicting waiter on another connection', BOUNDED, async () => {
  const [holder, waiter] = await Promise.all([dial(), dial()]);
  const lock = await holder.lock('node/wanted', { notifyWanted: true });
  const wanted = new Promise((resolve) => lock.once('wanted', resolve));
  const stop = new AbortController();
  const waiting = waiter.lock('node/wanted', { signal: stop.signal });
  const { waiting: n } = await wanted;
  assert.ok(n >= 1);
  const occupancy = await holder.occupancy('node/wanted');
  assert.deepEqual(occupancy.holders.map((h) => h.fence), [lock.fence]);
  stop.abort();
  await assert.rejects(waiting, { name: 'AbortError' });
  await lock.unlock();
  assert.deepEqual(await waiter.holds(), []);
});
