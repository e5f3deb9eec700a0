// The client against the real agent over real redis-servers: what the Go
// client's tests check (clients/go/client_test.go), in Node's terms.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Busy, Conflict, LockLost, NotHeld, connect } from '../index.js';
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
  const c = await connect({ path: cluster.socket, clientName: 'node-test' });
  clients.push(c);
  return c;
}

test('fifty tasks on one client keep mutual exclusion, fences increasing', BOUNDED, async () => {
  const c = await dial();
  let inside = 0;
  let grants = 0;
  const fences = [];
  const task = async () => {
    for (let i = 0; i < 5; i++) {
      const lock = await c.lock('node/fifty', { wait: 30000 });
      inside++;
      assert.equal(inside, 1, `${inside} tasks inside the lock`);
      fences.push(lock.fence);
      await new Promise(setImmediate); // let the other tasks run while it is held
      inside--;
      grants++;
      await lock.unlock();
    }
  };
  await Promise.all(Array.from({ length: 50 }, task));
  assert.equal(grants, 250);
  assert.deepEqual(fences, [...fences].sort((a, b) => a - b));
  assert.equal(new Set(fences).size, 250);
});

test('an owner re-enters: same fence, count up; another owner is busy', BOUNDED, async () => {
  const c = await dial();
  const a = await c.lock('node/reenter', { owner: 'me' });
  const b = await c.lock('node/reenter', { owner: 'me', wait: 0 });
  assert.equal(b.count, 2);
  assert.equal(b.fence, a.fence);
  await assert.rejects(c.lock('node/reenter', { wait: 0 }), Busy);
  await b.unlock();
  assert.equal(b.count, 1);
  await a.unlock();
  assert.equal(a.state, 'unlocked');
  await assert.rejects(a.unlock(), NotHeld);
  assert.deepEqual(await c.holds(), []);
});

test('typed errors: busy, and conflict for an upgrade of a shared hold', BOUNDED, async () => {
  const c = await dial();
  const other = await dial();
  const held = await c.lock('node/typed', { shared: true, owner: 'r' });
  await assert.rejects(other.lock('node/typed', { wait: 50 }), (err) => err instanceof Busy && err.code === 'BUSY');
  await assert.rejects(c.lock('node/typed', { owner: 'r' }), (err) => err instanceof Conflict && err.code === 'CONFLICT');
  await held.unlock();
});

test('a ttl hold that runs out is lost: event, promise, signal, and unlock says so', BOUNDED, async () => {
  const c = await dial();
  const lock = await c.lock('node/ttl', { ttl: 300 });
  const heard = new Promise((resolve) => lock.once('lost', resolve));
  const err = await lock.lost;
  assert.ok(err instanceof LockLost);
  assert.equal(err.reason, 'expired');
  assert.equal(await heard, err);
  assert.equal(lock.signal.reason, err);
  assert.equal(lock.state, 'lost');
  await assert.rejects(lock.unlock(), err);
});

test('an aborted wait leaves nothing held, also when the grant races the abort', BOUNDED, async () => {
  const holder = await dial();
  const c = await dial();
  let held = await holder.lock('node/abort');
  const reason = new Error('gave up');
  const ac = new AbortController();
  setTimeout(() => ac.abort(reason), 50);
  await assert.rejects(c.lock('node/abort', { signal: ac.signal }), reason);
  await assert.rejects(c.lock('node/abort', { signal: AbortSignal.timeout(50) }), { name: 'TimeoutError' });
  for (let i = 0; i < 20; i++) {
    const signal = AbortSignal.timeout(20);
    setTimeout(() => held.unlock(), 19);
    try {
      await (await c.lock('node/abort', { signal })).unlock(); // granted before the abort: ours to release
    } catch (err) {
      assert.equal(err.name, 'TimeoutError');
    }
    held = await holder.lock('node/abort', { wait: 5000 }); // fails if an abandoned wait kept it
  }
  assert.deepEqual(await c.holds(), []);
  await held.unlock();
});

test('asyncDispose releases a hold, and rejects with the loss of a lost one', BOUNDED, async () => {
  const c = await dial();
  const lock = await c.lock('node/dispose');
  await lock[Symbol.asyncDispose]();
  assert.equal(lock.state, 'unlocked');
  assert.deepEqual(await c.holds(), []);
  await lock[Symbol.asyncDispose](); // already released: nothing to do
  const brief = await c.lock('node/dispose', { ttl: 100 });
  await brief.lost;
  await assert.rejects(brief[Symbol.asyncDispose](), LockLost);
});

test('shared holders together, an exclusive one waits for them', BOUNDED, async () => {
  const a = await dial();
  const b = await dial();
  const ra = await a.lock('node/rw', { shared: true });
  const rb = await b.lock('node/rw', { shared: true, wait: 0 });
  await assert.rejects(a.lock('node/rw', { wait: 0 }), Busy);
  const writer = b.lock('node/rw', { wait: 10000 });
  await ra.unlock();
  await rb.unlock();
  const w = await writer;
  assert.ok(w.fence > ra.fence);
  await w.unlock();
});

test('a semaphore grants its limit, each on its own slot', BOUNDED, async () => {
  const cs = await Promise.all([dial(), dial(), dial(), dial()]);
  const holds = await Promise.all(cs.slice(0, 3).map((c) => c.lock('node/sem', { limit: 3, wait: 5000 })));
  assert.deepEqual(holds.map((h) => h.slot).sort(), [1, 2, 3]);
  await assert.rejects(cs[3].lock('node/sem', { limit: 3, wait: 0 }), Busy);
  await assert.rejects(cs[3].lock('node/sem', { limit: 2, wait: 0 }), Conflict);
  const who = await cs[3].who('node/sem');
  assert.deepEqual(who.map((h) => h.limit), [3, 3, 3]);
  await Promise.all(holds.map((h) => h.unlock()));
});

test('lockAll takes every name or none, and disposes of them all', BOUNDED, async () => {
  const c = await dial();
  const other = await dial();
  const locks = await c.lockAll(['node/m2', 'node/m1']);
  assert.deepEqual(locks.map((l) => l.name), ['node/m2', 'node/m1']);
  assert.ok(locks.every((l) => l.held && l.fence > 0 && l.count === 1));
  const blocker = await other.lock('node/m3');
  await assert.rejects(c.lockAll(['node/m4', 'node/m3'], { wait: 0 }), Busy);
  assert.deepEqual((await other.who('node/m4')), [], 'a failed multi-lock left a name held');
  await blocker.unlock();
  await locks[Symbol.asyncDispose]();
  assert.deepEqual(await c.holds(), []);
});

test('the example runs against the agent', BOUNDED, async () => {
  const { execFile } = await import('node:child_process');
  const example = new URL('../examples/basic.js', import.meta.url).pathname;
  const { stdout } = await new Promise((resolve, reject) => {
    execFile(process.execPath, [example], { env: { ...process.env, LOCK_AGENT_SOCKET: cluster.socket }, timeout: 20000 },
      (err, out, errOut) => (err ? reject(new Error(`${err.message}\n${errOut}`)) : resolve({ stdout: out })));
  });
  assert.match(stdout, /^holding reports\/nightly, fence \d+\nelected, term \d+; the leader is at http:\/\/host-a:8080\/\n$/);
});

test("the README's Node snippet runs against the agent", BOUNDED, async () => {
  const { readFile } = await import('node:fs/promises');
  const { execFile } = await import('node:child_process');
  const readme = await readFile(new URL('../../../README.md', import.meta.url), 'utf8');
  const section = readme.slice(readme.indexOf('## From Node'));
  const start = section.indexOf('```js\n') + 6;
  const snippet = section.slice(start, section.indexOf('\n```', start));
  const index = new URL('../index.js', import.meta.url).href;
  const program = snippet.replace("'./clients/node/index.js'", `'${index}'`);
  assert.notEqual(program, snippet, 'the snippet imports the client from elsewhere');
  const stdout = await new Promise((resolve, reject) => {
    execFile(process.execPath, ['--input-type=module', '-e', program],
      { env: { ...process.env, LOCK_AGENT_SOCKET: cluster.socket }, timeout: 20000 },
      (err, out, errOut) => (err ? reject(new Error(`${err.message}\n${errOut}`)) : resolve(out)));
  });
  assert.match(stdout, /^holding jobs\/nightly fence \d+\n$/);
});
