// The client: one connection to the agent, the holds taken through it
// (so that * LOST and * WANTED pushes reach them), and the verbs.
import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ConnectionClosed, InvalidArgument } from './errors.js';
import { Connection, open } from './connection.js';
import { holdsOf, occupancyOf, statusOf } from './info.js';
import { Lock } from './lock.js'; // also defines Symbol.asyncDispose where Node lacks it
import { Observations, leaderOf } from './observe.js';
import { checkNames, checkOptions, lockLine, lockWords } from './options.js';
import { checkAgentId, checkClientName, checkFence, checkName, checkOwner, checkReason, fields, int } from './wire.js';

export const DEFAULT_SOCKET = '/run/lock-agent/agent.sock';

/**
 * Where `lock-agent run -dev` listens: $XDG_RUNTIME_DIR/lock-agent/agent.sock,
 * or, without XDG_RUNTIME_DIR, lock-agent-UID/agent.sock in $TMPDIR (default /tmp).
 */
export function devSocketPath() {
  const xdg = process.env.XDG_RUNTIME_DIR;
  if (xdg) return path.join(xdg, 'lock-agent', 'agent.sock');
  return path.join(process.env.TMPDIR || '/tmp', `lock-agent-${os.userInfo().uid}`, 'agent.sock');
}

/** The agent's socket: $LOCK_AGENT_SOCKET; else /run/lock-agent/agent.sock if it exists; else the -dev socket. */
export function socketPath() {
  if (process.env.LOCK_AGENT_SOCKET) return process.env.LOCK_AGENT_SOCKET;
  if (existsSync(DEFAULT_SOCKET)) return DEFAULT_SOCKET;
  return devSocketPath();
}

/** The program's name as a client name for the agent's logs. */
function programName() {
  const base = path.basename(process.argv[1] ?? 'node').replace(/[^A-Za-z0-9._:/@+-]/g, '_').slice(0, 64);
  return base || 'node';
}

// The options each call takes: any other key is refused (see checkOptions).
const CONNECT_OPTIONS = new Set(['path', 'clientName']);
const REVOKE_OPTIONS = new Set(['agent', 'reason']);
const OBSERVE_OPTIONS = new Set(['signal']);

/**
 * Connects to the agent at options.path (default socketPath()) and says
 * HELLO. Rejects with a ConnectError when nothing answers there.
 */
export async function connect(options = {}) {
  const { path: where = socketPath(), clientName = programName() } = checkOptions(options, CONNECT_OPTIONS);
  checkClientName(clientName);
  const socket = await open(where, [DEFAULT_SOCKET, devSocketPath()]);
  const client = new Client(socket);
  try {
    const hello = await client._do(`HELLO proto=1 client=${clientName}`);
    client.session = hello.fields.session;
  } catch (err) {
    client.destroy();
    throw err;
  }
  return client;
}

export class Client {
  #conn;
  #holds = new Map(); // "name owner" -> Set<Lock> taken or being taken through this client
  #observations;
  #owners = 0;
  #resolveClosed;

  /** Use connect(). */
  constructor(socket) {
    this.session = undefined;
    /** Resolves when the connection to the agent is gone. */
    this.closed = new Promise((resolve) => { this.#resolveClosed = resolve; });
    this.#conn = new Connection(socket, (words) => this.#push(words), () => this.#shutdown());
    this.#observations = new Observations(this.#conn);
  }

  _do(line) { return this.#conn.do(line); }

  #track(lock) {
    const key = `${lock.name} ${lock.owner}`;
    if (!this.#holds.has(key)) this.#holds.set(key, new Set());
    this.#holds.get(key).add(lock);
  }

  _untrack(lock) {
    const key = `${lock.name} ${lock.owner}`;
    const set = this.#holds.get(key);
    if (set?.delete(lock) && set.size === 0) this.#holds.delete(key);
  }

  #locksOf(name, owner) { return [...(this.#holds.get(`${name} ${owner ?? ''}`) ?? [])]; }

  #push([kind, name, ...rest]) {
    if (name === undefined) return;
    if (kind === 'LEADER') {
      this.#observations.push(leaderOf([name, ...rest]));
      return;
    }
    const f = fields(rest);
    if (kind === 'LOST') for (const lock of this.#locksOf(name, f.owner)) lock._lose(f.reason ?? 'unknown', f.why);
    if (kind === 'WANTED') for (const lock of this.#locksOf(name, f.owner)) lock._want(f.waiting);
  }

  #shutdown() {
    const locks = [...this.#holds.values()].flatMap((set) => [...set]);
    this.#holds.clear();
    for (const lock of locks) lock._lose('disconnected');
    this.#observations.closeAll();
    this.#resolveClosed();
  }

  /**
   * Closes the connection; the agent releases every hold it had, then
   * closes its end, and only then does this resolve: the locks are
   * released (or, if no master could be reached, left to expire).
   */
  close() { return this.#conn.close(); }

  /** Ends the connection at once. */
  destroy() { this.#conn.destroy(); }

  /** `await using client = await connect()` closes it at the end of the block. */
  [Symbol.asyncDispose]() { return this.close(); }

  /** Resolves when the agent answers. */
  async ping() { await this._do('PING'); }

  #owner(options) {
    return options.owner === undefined ? `n${++this.#owners}` : checkOwner(options.owner);
  }

  /**
   * Acquires name. Resolves with the Lock once granted; rejects with Busy
   * when options.wait ran out, with options.signal's reason when it aborted
   * first (the wait is cancelled at the agent and a grant that won the race
   * released, so nothing stays held), with an InvalidArgument before
   * anything is sent when a name or option is outside the protocol.
   */
  async lock(name, options = {}) {
    checkName(name);
    const [lock] = await this.#acquire([name], options);
    return lock;
  }

  /**
   * Acquires every name, or none: the agent claims them in byte order, so
   * two lockAll() over overlapping names never deadlock. Resolves with one
   * Lock per name, in the order given (each independent after the grant),
   * in an array that `await using` disposes of (releasing every one held).
   */
  async lockAll(names, options = {}) {
    checkNames(names);
    const locks = await this.#acquire(names, options);
    locks[Symbol.asyncDispose] = () => disposeAll(locks);
    return locks;
  }

  /** Runs for leader of name: a fair lock carrying value, which observers see. */
  campaign(name, value, options = {}) {
    return this.lock(name, { ...options, fair: true, value });
  }

  async #acquire(names, options) {
    const words = lockWords(options);
    const owner = this.#owner(options);
    const line = lockLine(names, owner, words);
    const { signal } = options;
    signal?.throwIfAborted();
    if (this.#conn.closed) throw new ConnectionClosed();
    // Track the locks before sending, so a * LOST racing the reply finds them.
    const locks = names.map((n) => new Lock(this, n, owner, options.value));
    locks.forEach((l) => this.#track(l));
    try {
      const { tag, reply } = this.#conn.send(line);
      const answer = await untilAborted(reply, signal);
      if (answer === aborted) return await this.#abandon(tag, reply, locks, signal.reason);
      const err = answer.error();
      if (err) throw err;
      grant(locks, answer.fields);
      return locks;
    } finally {
      locks.filter((l) => !l.held).forEach((l) => this._untrack(l));
    }
  }

  /** Cancels a LOCK whose caller gave up, releases it if it was granted first, and throws why. */
  async #abandon(tag, reply, locks, reason) {
    try {
      await this.#conn.send(`CANCEL ${tag}`).reply;
      const answer = await reply;
      if (answer.kind === 'OK') {
        grant(locks, answer.fields);
        await Promise.allSettled(locks.map((l) => l.unlock()));
      }
    } catch {
      // The connection closed: the agent released whatever it granted.
    }
    throw reason;
  }

  /** The agent's state: its masters, sessions, holds, waiters and quorum. */
  async status() { return statusOf(await this._do('STATUS')); }

  /** Every hold of this connection. */
  async holds() { return holdsOf(await this._do('HOLDS')); }

  /** The holders of name, as the masters record them (any agent, any host). */
  async who(name) { return (await this.occupancy(name)).holders; }

  /** WHO in full: holders, agents with waiting requests, the fair queue's length, a standing delay. */
  async occupancy(name) { return occupancyOf(await this._do(`WHO ${checkName(name)}`)); }

  /**
   * Whether fence is the fence of a current holder of name, as a majority of masters records it.
   * For a name cached by another agent, a fence whose holder let go may read current for up to a
   * renewal tick (see docs/protocol.md, CHECK); to refuse a holder the moment it lets go, compare
   * fences.
   */
  async check(name, fence) {
    checkName(name);
    const reply = await this._do(`CHECK ${name} fence=${checkFence(fence)}`);
    return reply.fields.current === 'true';
  }

  /** Ends the holds of name wherever they are (an operator's verb); resolves with how many. */
  async revoke(name, options = {}) {
    checkOptions(options, REVOKE_OPTIONS);
    let line = `REVOKE ${checkName(name)}`;
    if (options.agent !== undefined) line += ` agent=${checkAgentId(options.agent)}`;
    if (options.reason !== undefined) line += ` reason=${checkReason(options.reason)}`;
    return int((await this._do(line)).fields.n);
  }

  /**
   * Observes the election of name: resolves, once the agent accepted,
   * with an async iterable of leaders (the leader as read after the call
   * began first, then each change). It ends when options.signal aborts or the loop breaks, and
   * throws ConnectionClosed when the connection ends.
   */
  async observe(name, options = {}) {
    checkName(name);
    const { signal } = checkOptions(options, OBSERVE_OPTIONS);
    signal?.throwIfAborted();
    const observer = await this.#observations.join(name);
    // Listened for here, not in the generator: its body runs only once it
    // is read, and an abort before that must end the OBSERVE all the same.
    const stop = () => this.#observations.leave(name, observer);
    if (signal?.aborted) stop();
    else signal?.addEventListener('abort', stop, { once: true });
    return this.#leaders(observer, signal, stop);
  }

  /** observer's leaders until signal aborts (those queued before it are dropped) or the loop breaks. */
  async* #leaders(observer, signal, stop) {
    try {
      while (!signal?.aborted) {
        const next = await observer.next().catch((err) => (signal?.aborted ? aborted : Promise.reject(err)));
        if (next === aborted || signal?.aborted) return;
        yield next;
      }
    } finally {
      signal?.removeEventListener('abort', stop);
      stop();
    }
  }

  /**
   * The current leader of name (`none: true` while there is none), as the
   * agent read it after the call began: never a term that had ended before.
   */
  async leader(name, options = {}) {
    checkName(name);
    const { signal } = checkOptions(options, OBSERVE_OPTIONS);
    signal?.throwIfAborted();
    const observer = await this.#observations.join(name);
    try {
      const next = await untilAborted(observer.next(), signal);
      if (next === aborted) throw signal.reason;
      return next;
    } finally {
      this.#observations.leave(name, observer);
    }
  }
}

const aborted = Symbol('aborted');

/** The promise's value, or `aborted` if signal aborts first. */
function untilAborted(promise, signal) {
  if (signal === undefined) return promise;
  let stop;
  const abort = new Promise((resolve) => {
    stop = () => resolve(aborted);
    if (signal.aborted) stop();
    else signal.addEventListener('abort', stop, { once: true });
  });
  return Promise.race([promise, abort]).finally(() => signal.removeEventListener('abort', stop));
}

/** Spreads a (multi-)lock's grant (comma-separated fences, counts, slots) over its locks. */
function grant(locks, f) {
  const list = (k) => (f[k] ?? '').split(',');
  const [fences, counts, slots] = [list('fence'), list('count'), list('slot')];
  locks.forEach((l, i) => l._grant({ fence: fences[i], count: counts[i], slot: slots[i], validity: f.validity }));
}

/** Releases every lock of a lockAll() still held; rejects with the first failure (a loss last). */
async function disposeAll(locks) {
  const results = await Promise.allSettled(locks.map((l) => l[Symbol.asyncDispose]()));
  const errors = results.filter((r) => r.status === 'rejected').map((r) => r.reason);
  const first = errors.find((e) => e.code !== 'LOST') ?? errors[0];
  if (first) throw first;
}
