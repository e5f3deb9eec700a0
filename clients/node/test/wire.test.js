// What the real agent cannot be made to do on cue, against a scripted
// agent: replies and pushes in a given order, every error code, a
// connection that ends with an UNLOCK unanswered.
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import * as lockagent from '../index.js';
import { grantAll, startFake } from './fake.js';

const { ConnectError, LockLost, NotHeld, connect, devSocketPath, socketPath } = lockagent;

async function fakeClient(t, answer) {
  const fake = await startFake(answer);
  const client = await connect({ path: fake.path });
  t.after(async () => {
    await client.close();
    await fake.close();
  });
  return { fake, client };
}

test('every ERR code becomes its error class, an unknown one InternalError', async (t) => {
  const codes = {
    BAD_REQUEST: 'BadRequest', UNKNOWN_VERB: 'UnknownVerb', BAD_NAME: 'BadName', NOT_HELD: 'NotHeld',
    NO_QUORUM: 'NoQuorum', CONFLICT: 'Conflict', SETTINGS: 'SettingsDiffer', DENIED: 'Denied', LIMIT: 'LimitReached',
    CANCELLED: 'Cancelled', SHUTTING_DOWN: 'ShuttingDown', INTERNAL: 'InternalError', NEWER_CODE: 'InternalError',
  };
  let code;
  const { client } = await fakeClient(t, () => [`ERR ${code} what the agent says`]);
  for ([code] of Object.entries(codes)) {
    await assert.rejects(client.ping(), (err) => {
      assert.ok(err instanceof lockagent[codes[code]], `${code}: ${err.name}`);
      assert.equal(err.code, code === 'NEWER_CODE' ? 'INTERNAL' : code);
      assert.equal(err.message, 'what the agent says');
      return true;
    });
  }
});

test('an unlock the connection cuts short is a release, not a loss', async (t) => {
  const { fake, client } = await fakeClient(t, (verb, args) => (verb === 'UNLOCK' ? [] : grantAll(verb, args)));
  const lock = await client.lock('w/cut');
  const unlocking = lock.unlock();
  await new Promise((resolve) => { const poll = () => (fake.requests.length === 2 ? resolve() : setImmediate(poll)); poll(); });
  for (const s of fake.sockets) s.destroy();
  await unlocking;
  assert.equal(lock.state, 'unlocked');
  assert.equal(lock.error, undefined);
});

test('a hold whose unlock was refused is lost, not released, when the connection ends', { timeout: 10000 }, async (t) => {
  const { fake, client } = await fakeClient(t, (verb, args) => (verb === 'UNLOCK' ? ['ERR INTERNAL no'] : grantAll(verb, args)));
  const lock = await client.lock('w/refused');
  await assert.rejects(lock.unlock(), lockagent.InternalError);
  assert.equal(lock.state, 'held');
  for (const s of fake.sockets) s.destroy();
  assert.equal((await lock.lost).reason, 'disconnected');
  assert.equal(lock.state, 'lost');
});

test('NOT_HELD to an unlock without a * LOST first is a loss all the same', async (t) => {
  const { client } = await fakeClient(t, (verb, args) => (verb === 'UNLOCK' ? ['ERR NOT_HELD gone'] : grantAll(verb, args)));
  const lock = await client.lock('w/gone');
  await assert.rejects(lock.unlock(), (err) => err instanceof LockLost && err.reason === 'unknown');
  assert.equal(lock.state, 'lost');
  await assert.rejects(lock.unlock(), LockLost);
});

test('pushes reach the hold of their name and owner only', async (t) => {
  const { client } = await fakeClient(t, (verb, args) => {
    const owner = args.find((a) => a.startsWith('owner='))?.slice(6);
    if (verb === 'PING') return ['* WANTED w/p owner=b waiting=3', '* LOST w/p owner=a fence=7 reason=revoked why=maint', 'OK'];
    return grantAll(verb, args).map((r) => (owner === 'b' ? r.replace('fence=7', 'fence=8') : r));
  });
  const a = await client.lock('w/p', { owner: 'a' });
  const b = await client.lock('w/p', { owner: 'b' });
  const wanted = new Promise((resolve) => b.once('wanted', resolve));
  a.on('wanted', () => assert.fail('the wanted push was for b'));
  await client.ping();
  assert.deepEqual(await wanted, { waiting: 3 });
  const err = await a.lost;
  assert.deepEqual([err.lockName, err.owner, err.fence, err.reason, err.why], ['w/p', 'a', 7, 'revoked', 'maint']);
  assert.equal(b.state, 'held');
  await assert.rejects(a.proclaim('x'), LockLost);
  await assert.rejects(a.extend(10), LockLost);
});

test('observers see each change once; leader() takes the push after its own OBSERVE', async (t) => {
  const pushes = [];
  const { fake, client } = await fakeClient(t, (verb) => (verb === 'OBSERVE' ? ['OK', ...pushes.splice(0)] : ['OK']));
  pushes.push('* LEADER w/e none');
  const stop = new AbortController();
  const leaders = (await client.observe('w/e', { signal: stop.signal }))[Symbol.asyncIterator]();
  assert.equal((await leaders.next()).value.none, true);
  pushes.push('* LEADER w/e fence=9 value=a%20b agent=h1');
  const now = await client.leader('w/e');
  assert.deepEqual(now, { name: 'w/e', none: false, fence: 9, value: 'a b', agent: 'h1' });
  pushes.push('* LEADER w/e fence=9 value=a%20b agent=h1'); // a repeat: leader() wants it, observers saw it
  assert.equal((await client.leader('w/e')).fence, 9);
  assert.equal((await leaders.next()).value.fence, 9); // once, though pushed twice
  pushes.push('* LEADER w/e fence=10 agent=h2');
  await client.leader('w/e');
  assert.deepEqual((await leaders.next()).value, { name: 'w/e', none: false, fence: 10, value: undefined, agent: 'h2' });
  stop.abort();
  assert.equal((await leaders.next()).done, true);
  await new Promise((resolve) => { const poll = () => (fake.requests.at(-1) === 'UNOBSERVE w/e' ? resolve() : setImmediate(poll)); poll(); });
  assert.deepEqual(fake.requests, ['OBSERVE w/e', 'OBSERVE w/e', 'OBSERVE w/e', 'OBSERVE w/e', 'UNOBSERVE w/e']);
});

test('revoke and check go on the wire as the protocol spells them', async (t) => {
  const { fake, client } = await fakeClient(t, (verb) => (verb === 'REVOKE' ? ['OK n=2'] : ['OK current=true']));
  assert.equal(await client.revoke('w/r', { agent: 'web-7', reason: 'maint' }), 2);
  assert.equal(await client.check('w/r', 12345678901234567890n), true);
  assert.deepEqual(fake.requests, ['REVOKE w/r agent=web-7 reason=maint', 'CHECK w/r fence=12345678901234567890']);
});

test('a socket nobody listens on is a ConnectError that says what to do', async () => {
  const where = path.join(devSocketPath(), 'nobody', 'agent.sock');
  await assert.rejects(connect({ path: where }), (err) => {
    assert.ok(err instanceof ConnectError);
    assert.equal(err.code, 'CONNECT');
    assert.equal(err.path, where);
    assert.match(err.message, /lock-agent run -dev/);
    assert.match(err.message, /LOCK_AGENT_SOCKET/);
    return true;
  });
});

test('the socket is $LOCK_AGENT_SOCKET, else the -dev one under $XDG_RUNTIME_DIR or $TMPDIR', () => {
  const keys = ['LOCK_AGENT_SOCKET', 'XDG_RUNTIME_DIR', 'TMPDIR'];
  const saved = Object.fromEntries(keys.map((k) => [k, process.env[k]]));
  try {
    process.env.LOCK_AGENT_SOCKET = '/x/agent.sock';
    assert.equal(socketPath(), '/x/agent.sock');
    delete process.env.LOCK_AGENT_SOCKET;
    process.env.XDG_RUNTIME_DIR = '/run/user/7';
    assert.equal(devSocketPath(), '/run/user/7/lock-agent/agent.sock');
    delete process.env.XDG_RUNTIME_DIR;
    process.env.TMPDIR = '/tmp2';
    assert.match(devSocketPath(), /^\/tmp2\/lock-agent-\d+\/agent\.sock$/);
  } finally {
    for (const k of keys) {
      if (saved[k] === undefined) delete process.env[k];
      else process.env[k] = saved[k];
    }
  }
});

test('NotHeld for a proclaim of an unlocked hold', async (t) => {
  const { client } = await fakeClient(t);
  const lock = await client.lock('w/u');
  await lock.unlock();
  await assert.rejects(lock.proclaim('x'), NotHeld);
  assert.ok(lock.signal.aborted);
  assert.ok(lock.signal.reason instanceof NotHeld);
});

test('disposing of a client closes it, and the agent releases its holds', async (t) => {
  const fake = await startFake();
  t.after(() => fake.close());
  const client = await connect({ path: fake.path });
  const lock = await client.lock('w/d');
  await client[Symbol.asyncDispose]();
  await client.closed;
  assert.equal(lock.state, 'lost');
  assert.equal(lock.error.reason, 'disconnected');
  await assert.rejects(client.ping(), lockagent.ConnectionClosed);
});

test("an observation ends with ConnectionClosed when the agent's connection does", async (t) => {
  const { fake, client } = await fakeClient(t, (verb) => (verb === 'OBSERVE' ? ['OK', '* LEADER w/o none'] : ['OK']));
  const leaders = (await client.observe('w/o'))[Symbol.asyncIterator]();
  assert.equal((await leaders.next()).value.none, true);
  const pending = leaders.next();
  for (const s of fake.sockets) s.destroy();
  await assert.rejects(pending, lockagent.ConnectionClosed);
  await assert.rejects(client.leader('w/o'), lockagent.ConnectionClosed);
});

test('an observation aborted before it is read ends its OBSERVE and yields nothing more', { timeout: 10000 }, async (t) => {
  const { fake, client } = await fakeClient(t, (verb) => (verb === 'OBSERVE' ? ['OK', '* LEADER w/a none'] : ['OK']));
  const stop = new AbortController();
  const leaders = await client.observe('w/a', { signal: stop.signal });
  await client.ping(); // the push after OBSERVE's reply is queued for the observer
  stop.abort();
  await new Promise((resolve) => { const poll = () => (fake.requests.at(-1) === 'UNOBSERVE w/a' ? resolve() : setImmediate(poll)); poll(); });
  assert.equal((await leaders[Symbol.asyncIterator]().next()).done, true);
});

test('leader() and observe() take no push from before their OBSERVE is answered (issue 31)', async (t) => {
  // While this connection observes w/s, the agent's push of an older state
  // may come between a new OBSERVE and its OK: that state predates the call.
  let script = ['OK', '* LEADER w/s fence=5 agent=h1'];
  const { client } = await fakeClient(t, (verb) => (verb === 'OBSERVE' ? script : ['OK']));
  const stop = new AbortController();
  const leaders = (await client.observe('w/s', { signal: stop.signal }))[Symbol.asyncIterator]();
  assert.equal((await leaders.next()).value.fence, 5);
  script = ['* LEADER w/s none', 'OK', '* LEADER w/s fence=6 agent=h2'];
  assert.equal((await client.leader('w/s')).fence, 6);
  script = ['* LEADER w/s fence=6 value=old agent=h2', 'OK', '* LEADER w/s fence=7 agent=h1'];
  const second = (await client.observe('w/s', { signal: stop.signal }))[Symbol.asyncIterator]();
  assert.equal((await second.next()).value.fence, 7);
  stop.abort();
});
