// Arguments outside the protocol are refused before anything is sent, and
// what is sent has the shape the protocol wants (against a scripted agent,
// which records every line).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import {
  BadName, BadRequest, InvalidArgument, InvalidName, connect, decodeValue, encodeValue,
} from '../index.js';
import { startFake } from './fake.js';

let fake;
let client;
before(async () => {
  fake = await startFake();
  client = await connect({ path: fake.path, clientName: 'arguments' });
});
after(async () => {
  await client.close();
  await fake.close();
});

const refused = [
  ['a name with a space', (c) => c.lock('a b'), 'name'],
  ['an empty name', (c) => c.lock(''), 'name'],
  ['a name of 201 bytes', (c) => c.lock('n'.repeat(201)), 'name'],
  ['a name that is not a string', (c) => c.lock(42), 'name'],
  ['a name with a newline (another request)', (c) => c.lock('x\n2 UNLOCK y'), 'name'],
  ['an owner with a slash', (c) => c.lock('n', { owner: 'a/b' }), 'owner'],
  ['an owner of 65 bytes', (c) => c.lock('n', { owner: 'o'.repeat(65) }), 'owner'],
  ['a negative wait', (c) => c.lock('n', { wait: -1 }), 'wait'],
  ['a wait that is not a number', (c) => c.lock('n', { wait: '5s' }), 'wait'],
  ['a wait of NaN', (c) => c.lock('n', { wait: NaN }), 'wait'],
  ['a wait longer than a year', (c) => c.lock('n', { wait: 366 * 864e5 }), 'wait'],
  ['a ttl of 0', (c) => c.lock('n', { ttl: 0 }), 'ttl'],
  ['a ttl longer than 30 days (the agent\'s bound)', (c) => c.lock('n', { ttl: 31 * 864e5 }), 'ttl'],
  ['a limit of 0', (c) => c.lock('n', { limit: 0 }), 'limit'],
  ['a limit of 4097', (c) => c.lock('n', { limit: 4097 }), 'limit'],
  ['a fractional limit', (c) => c.lock('n', { limit: 1.5 }), 'limit'],
  ['a shared semaphore', (c) => c.lock('n', { shared: true, limit: 2 }), 'limit'],
  ['fair as a string', (c) => c.lock('n', { fair: 'false' }), 'fair'],
  ['shared as a number', (c) => c.lock('n', { shared: 1 }), 'shared'],
  ['an unknown option', (c) => c.lock('n', { wiat: 5 }), 'option'],
  ['a value of 513 encoded bytes', (c) => c.lock('n', { value: 'v'.repeat(513) }), 'value'],
  ['a value that is a number', (c) => c.lock('n', { value: 7 }), 'value'],
  ['a delay over 5 minutes', (c) => c.lock('n', { delay: 300001 }), 'delay'],
  ['a minHold over 24 hours', (c) => c.lock('n', { minHold: 864e5 + 1 }), 'minHold'],
  ['a signal that is not an AbortSignal', (c) => c.lock('n', { signal: {} }), 'signal'],
  ['lockAll of no names', (c) => c.lockAll([]), 'names'],
  ['lockAll of one string', (c) => c.lockAll('n'), 'names'],
  ['lockAll of a name twice', (c) => c.lockAll(['a', 'b', 'a']), 'names'],
  ['lockAll of names too long for a line', (c) => c.lockAll(Array.from({ length: 30 }, (_, i) => `${i}`.padEnd(200, 'x'))), 'request'],
  ['a campaign with a lone surrogate', (c) => c.campaign('n', '\ud800'), 'value'],
  ['a check of fence 0', (c) => c.check('n', 0), 'fence'],
  ['a check of a fence as a string', (c) => c.check('n', '7'), 'fence'],
  ['a revoke with a reason of two words', (c) => c.revoke('n', { reason: 'a b' }), 'reason'],
  ['a revoke with an agent id holding =', (c) => c.revoke('n', { agent: 'a=b' }), 'agent'],
  ['a revoke with a misspelt option (else it would end every holder, on every agent)',
    (c) => c.revoke('n', { agnet: 'web-7' }), 'option'],
  ['observe with an unknown option', (c) => c.observe('n', { singal: AbortSignal.abort() }), 'option'],
  ['leader with an unknown option', (c) => c.leader('n', { timeout: 5 }), 'option'],
  ['who of a bad name', (c) => c.who('a b'), 'name'],
  ['observe of a bad name', (c) => c.observe('{x}'), 'name'],
  ['leader of a bad name', (c) => c.leader('{x}'), 'name'],
];

for (const [what, call, argument] of refused) {
  test(`${what} is refused before anything is sent`, async () => {
    const sent = fake.requests.length;
    await assert.rejects(call(client), (err) => {
      assert.ok(err instanceof InvalidArgument || err instanceof InvalidName, `${err}`);
      assert.equal(err.argument, argument);
      assert.equal(err.code, argument === 'name' ? 'BAD_NAME' : 'BAD_REQUEST');
      assert.ok(argument === 'name' ? err instanceof BadName : err instanceof BadRequest);
      return true;
    });
    assert.deepEqual(fake.requests.slice(sent), []);
  });
}

test('held-lock calls with bad arguments send nothing', async () => {
  const lock = await client.lock('held/args');
  const sent = fake.requests.length;
  await assert.rejects(lock.extend(0), InvalidArgument);
  await assert.rejects(lock.extend(31 * 864e5), InvalidArgument);
  await assert.rejects(lock.proclaim('x'.repeat(600)), InvalidArgument);
  assert.deepEqual(fake.requests.slice(sent), []);
  await lock.unlock();
});

test('an aborted signal sends nothing', async () => {
  const sent = fake.requests.length;
  const reason = new Error('gave up');
  await assert.rejects(client.lock('n', { signal: AbortSignal.abort(reason) }), reason);
  assert.deepEqual(fake.requests.slice(sent), []);
});

test('a bad client name is refused before connecting', async () => {
  await assert.rejects(connect({ path: fake.path, clientName: 'a b' }), InvalidArgument);
});

test('an unknown connect option is refused before connecting', async () => {
  await assert.rejects(connect({ socket: fake.path }), (err) => err instanceof InvalidArgument && err.argument === 'option');
});

test('options go on the wire as the protocol spells them', async () => {
  const sent = fake.requests.length;
  const lock = await client.lock('wire/one', {
    wait: 1.2, ttl: 1500, owner: 'me', shared: true, fair: true, value: 'a b%', notifyWanted: true, delay: 0,
    minHold: 250,
  });
  await client.lockAll(['wire/b', 'wire/a'], { limit: 3, owner: 'me' });
  await lock.extend(0.3);
  await lock.proclaim('ü');
  assert.deepEqual(fake.requests.slice(sent), [
    'LOCK wire/one owner=me wait=2 ttl=1500 mode=shared fair=true value=a%20b%25 notify=wanted delay=0 min_hold=250',
    'LOCK wire/b wire/a owner=me limit=3',
    'EXTEND wire/one ttl=1 owner=me',
    'SET wire/one value=%C3%BC owner=me',
  ]);
});

test('each lock has its own owner unless one is given', async () => {
  const sent = fake.requests.length;
  const a = await client.lock('own/x');
  const b = await client.lock('own/x');
  assert.notEqual(a.owner, b.owner);
  assert.match(fake.requests[sent], new RegExp(`^LOCK own/x owner=${a.owner}$`));
});

test('values of any text round-trip the percent-encoding', () => {
  for (const v of ['', 'plain', 'a b', '100%', 'http://h:1/p?q=1&r', '{"json": [1, "ü"]}', '日本', '%zz', 'emoji 🔒']) {
    assert.equal(decodeValue(encodeValue(v)), v, v);
    assert.match(encodeValue(v), /^[A-Za-z0-9._:/@+=%,-]*$/);
  }
  assert.equal(decodeValue('50%'), '50%'); // written unencoded by another client: kept
});
