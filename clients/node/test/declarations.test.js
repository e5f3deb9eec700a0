// index.d.ts is written by hand: check, with nothing but node, that it
// declares exactly what index.js exports, the public members of Client and
// Lock, and the error classes' hierarchy.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import * as lockagent from '../index.js';

const dts = readFileSync(new URL('../index.d.ts', import.meta.url), 'utf8');

/** The body of `declare class name ... { ... }` in the declarations (classes nest no braces but one level). */
function classBody(name) {
  const start = dts.indexOf(`export declare class ${name} `);
  assert.ok(start >= 0, `index.d.ts declares no class ${name}`);
  const open = dts.indexOf('{', start);
  let depth = 0;
  for (let i = open; i < dts.length; i++) {
    if (dts[i] === '{') depth++;
    if (dts[i] === '}' && --depth === 0) return dts.slice(open + 1, i);
  }
  throw new Error(`class ${name} does not end`);
}

/** The member names a declared class body lists (its direct members, not those of nested object types). */
function declaredMembers(body) {
  const names = new Set();
  for (const line of body.split('\n')) {
    const m = line.match(/^ {2}(?:private |readonly )*(\[Symbol\.\w+\]|\w+)[?(:]/);
    if (m && m[1] !== 'constructor') names.add(m[1]);
  }
  return names;
}

/** The public members of a live object: own and prototype properties, none that starts with _ or is EventEmitter's. */
function liveMembers(object, stopAt) {
  const names = new Set();
  for (let o = object; o && o !== stopAt; o = Object.getPrototypeOf(o)) {
    for (const key of Reflect.ownKeys(o)) {
      if (key === 'constructor') continue;
      if (typeof key === 'symbol') {
        if (key === Symbol.asyncDispose) names.add('[Symbol.asyncDispose]');
        continue;
      }
      if (!key.startsWith('_')) names.add(key);
    }
  }
  return names;
}

test('index.d.ts declares exactly the values index.js exports', () => {
  const declared = [...dts.matchAll(/^export declare (?:class|function|const) (\w+)/gm)].map((m) => m[1]).sort();
  assert.deepEqual(declared, Object.keys(lockagent).sort());
});

test('index.d.ts declares exactly the public members of Client', async () => {
  const { startFake } = await import('./fake.js');
  const fake = await startFake();
  const client = await lockagent.connect({ path: fake.path });
  try {
    assert.deepEqual([...declaredMembers(classBody('Client'))].sort(), [...liveMembers(client, Object.prototype)].sort());
  } finally {
    await client.close();
    await fake.close();
  }
});

test('index.d.ts declares exactly the public members of Lock', async () => {
  const { startFake } = await import('./fake.js');
  const fake = await startFake();
  const client = await lockagent.connect({ path: fake.path });
  try {
    const lock = await client.lock('dts/lock');
    const live = liveMembers(lock, (await import('node:events')).EventEmitter.prototype);
    assert.deepEqual([...declaredMembers(classBody('Lock'))].sort(), [...live].sort());
  } finally {
    await client.close();
    await fake.close();
  }
});

test('index.d.ts declares each error class with the parent it has', () => {
  const errors = [...dts.matchAll(/^export declare class (\w+) extends (\w+)/gm)].filter(([, , parent]) => parent !== 'EventEmitter');
  assert.ok(errors.length >= 19);
  for (const [, name, parent] of errors) {
    const parentClass = parent === 'Error' ? Error : lockagent[parent];
    assert.equal(Object.getPrototypeOf(lockagent[name]), parentClass, `${name} extends ${parent}`);
  }
});

test('the error fields index.d.ts declares are set', () => {
  const lost = new lockagent.LockLost('n', 'o', 7, 'quorum', undefined);
  const invalid = new lockagent.InvalidArgument('wait', -1, 'more');
  const fields = (name) => [...declaredMembers(classBody(name))];
  for (const f of fields('LockLost')) assert.ok(f in lost, `LockLost.${f}`);
  for (const f of fields('InvalidArgument')) assert.ok(f in invalid, `InvalidArgument.${f}`);
  for (const f of fields('InvalidName')) assert.ok(f in new lockagent.InvalidName('x y', 'a name'), `InvalidName.${f}`);
  assert.ok('path' in new lockagent.ConnectError('/p', new Error('x'), 'a', 'b'));
});
