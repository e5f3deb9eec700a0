// Failures, each on a cluster of its own: masters that stop, an agent
// that dies (as clients/go/client_test.go's TestKilledAgentEndsEveryLock).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConnectionClosed, LockLost, connect } from '../index.js';
import { startCluster } from './cluster.js';

// A client that misses an event fails the test instead of hanging it.
const BOUNDED = { timeout: 30000 };

const LEASE = 2000;
// What carrying one line from the agent to this process may take on a
// loaded machine (2 cores shared by many test runs: up to 52 ms seen).
// The agent's own timing is the Go tests' (tests/faults_test.go); here
// the client must pass the loss on as it comes.
const DELIVERY = 250;

test('a hold is lost within a lease, before its validity ran out, once two of three masters stop', BOUNDED, async (t) => {
  const cluster = await startCluster({ lock: `lease = "${LEASE}ms"` });
  t.after(() => cluster.stop());
  const c = await connect({ path: cluster.socket });
  t.after(() => c.close());
  const lock = await c.lock('node/quorum');
  const other = await c.lock('node/quorum-2', { ttl: 60000 });
  const stopped = performance.now();
  cluster.pause(0);
  cluster.pause(1);
  const validUntil = await validityUntilLost(c, lock);
  const lostAt = performance.now();
  const err = await lock.lost;
  assert.ok(err instanceof LockLost);
  assert.equal(err.reason, 'quorum');
  assert.equal((await other.lost).reason, 'quorum');
  assert.equal(lock.signal.aborted, true);
  const took = lostAt - stopped;
  assert.ok(took <= LEASE + DELIVERY, `lost ${Math.round(took)}ms after the masters stopped (lease ${LEASE}ms)`);
  assert.ok(lostAt <= validUntil + DELIVERY, `lost ${Math.round(lostAt - validUntil)}ms after the hold's validity ended`);
});

/**
 * Polls the hold's validity as the agent reports it (a renewal answered
 * just before the pause may still move it on once) until the loss is
 * heard, and returns when the validity last reported ends.
 */
async function validityUntilLost(client, lock) {
  let validUntil = Infinity;
  while (lock.held) {
    const hold = (await client.holds()).find((h) => h.name === lock.name);
    if (hold && lock.held) validUntil = performance.now() + hold.validity + 1; // validity= is cut to whole ms
    await Promise.race([lock.lost, new Promise((r) => setTimeout(r, 10))]); // a poll: HOLDS is all there is to watch
  }
  return validUntil;
}

test('an agent killed: every hold reports its loss, and every call after it fails', BOUNDED, async (t) => {
  const cluster = await startCluster();
  t.after(() => cluster.stop());
  const c = await connect({ path: cluster.socket });
  const locks = await Promise.all(['k1', 'k2', 'k3'].map((n) => c.lock(n)));
  const [multi] = await Promise.all([c.lockAll(['k4', 'k5'])]);
  const heard = locks.map((l) => new Promise((resolve) => l.once('lost', resolve)));
  await cluster.killAgent();
  for (const err of await Promise.all([...locks, ...multi].map((l) => l.lost))) {
    assert.ok(err instanceof LockLost);
    assert.equal(err.reason, 'disconnected');
  }
  await Promise.all(heard);
  await c.closed;
  await assert.rejects(c.lock('k6'), ConnectionClosed);
  await assert.rejects(c.ping(), ConnectionClosed);
  await assert.rejects(locks[0].unlock(), LockLost);
});
