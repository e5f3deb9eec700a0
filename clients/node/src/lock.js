// One hold of a name: from the agent's grant until unlock() releases it or
// it is lost (a * LOST push, the connection's end).
import { EventEmitter } from 'node:events';
import { ConnectionClosed, LockLost, NotHeld } from './errors.js';
import { checkValue, int, ttlMs } from './wire.js';

// Node 20 may lack Symbol.asyncDispose: the symbol Node itself uses.
Symbol.asyncDispose ??= Symbol.for('nodejs.asyncDispose');

/**
 * A held lock. It emits 'lost' (a LockLost) when the hold ends without
 * unlock(), and 'wanted' ({ waiting }) when the lock was taken with
 * notifyWanted and a conflicting request starts waiting. `lost` is the same
 * loss as a promise; `signal` aborts when the hold ends for any reason.
 */
export class Lock extends EventEmitter {
  #client;
  #abort = new AbortController();
  #resolveLost;
  #validity = 0;
  #validAt = 0;
  #unlocking = false;

  constructor(client, name, owner, value) {
    super();
    this.#client = client;
    this.name = name;
    this.owner = owner;
    this.fence = 0;
    this.count = 0;
    this.slot = 0;
    this.value = value === '' ? undefined : value;
    /** 'waiting' until granted, then 'held', then 'unlocked' or 'lost'. */
    this.state = 'waiting';
    /** Why the hold was lost (a LockLost), once it was; else undefined. */
    this.error = undefined;
    /** Resolves with the LockLost when the hold is lost; never if it is unlocked. */
    this.lost = new Promise((resolve) => { this.#resolveLost = resolve; });
  }

  /** Aborted when the hold ends: its reason is the LockLost, or a NotHeld after unlock(). */
  get signal() { return this.#abort.signal; }

  /** Milliseconds the hold is still known valid, as of its grant or last extend(). */
  get validity() { return Math.max(0, this.#validity - (performance.now() - this.#validAt)); }

  /** True while the hold is held: granted, not unlocked, not lost. */
  get held() { return this.state === 'held'; }

  /** Records a grant's fields (fence=, count=, slot=, validity=). */
  _grant(f) {
    this.fence = int(f.fence);
    this.count = int(f.count);
    this.slot = int(f.slot);
    this.#setValidity(f.validity);
    if (this.state === 'waiting') this.state = 'held'; // a * LOST that raced the grant keeps it lost
  }

  #setValidity(validity) {
    this.#validity = int(validity);
    this.#validAt = performance.now();
  }

  /** Ends the hold as lost, for a reason; a hold whose UNLOCK was sent is released by a closed connection. */
  _lose(reason, why) {
    if (this.state !== 'held' && this.state !== 'waiting') return;
    if (reason === 'disconnected' && this.#unlocking) {
      this.#end('unlocked');
      return;
    }
    this.error = new LockLost(this.name, this.owner, this.fence, reason, why);
    this.#end('lost');
    this.#resolveLost(this.error);
    // Listeners run after the reader is done with the line: one that throws
    // is the program's uncaught exception, not a stop of the reader.
    queueMicrotask(() => this.emit('lost', this.error));
  }

  _want(waiting) {
    const event = { waiting: int(waiting, 1) };
    if (this.held) queueMicrotask(() => this.emit('wanted', event));
  }

  #end(state) {
    this.state = state;
    this.#client._untrack(this);
    this.#abort.abort(this.error ?? new NotHeld(`${this.name} was unlocked`));
  }

  #refuseUnlessHeld() {
    if (this.state === 'lost') throw this.error;
    if (this.state !== 'held') throw new NotHeld(`${this.name} is not held (${this.state})`);
  }

  /**
   * Releases this hold (one re-entry, when the owner re-entered). Rejects
   * with the LockLost if the hold was lost, NotHeld if it was unlocked
   * already. A connection that closes meanwhile releases it just as well.
   */
  async unlock() {
    this.#refuseUnlessHeld();
    this.#unlocking = true;
    try {
      const reply = await this.#client._do(`UNLOCK ${this.name} owner=${this.owner}`);
      this.count = int(reply.fields.count);
    } catch (err) {
      if (err instanceof ConnectionClosed) return; // the agent releases every hold of a closed connection
      if (!(err instanceof NotHeld)) throw err;
      this._lose('unknown'); // NOT_HELD with no * LOST before it: lost all the same
      throw this.error;
    } finally {
      // Refused, it is still held: a connection that ends later loses it.
      // (One that ended meanwhile has been seen already: see _lose.)
      this.#unlocking = false;
    }
    if (this.state === 'lost') throw this.error;
    this.#end('unlocked');
  }

  /**
   * Sets the hold's end to ttl milliseconds from now (more than 0, at most
   * 30 days) and resolves with its new validity in milliseconds.
   */
  async extend(ttl) {
    const wire = ttlMs(ttl);
    this.#refuseUnlessHeld();
    const reply = await this.#client._do(`EXTEND ${this.name} ttl=${wire} owner=${this.owner}`);
    this.#setValidity(reply.fields.validity);
    return this.validity;
  }

  /** Replaces the hold's value (observers of an election see it); resolves once a majority has it. */
  async proclaim(value) {
    const wire = checkValue(value);
    this.#refuseUnlessHeld();
    await this.#client._do(`SET ${this.name} value=${wire} owner=${this.owner}`);
    this.value = value;
  }

  /**
   * `await using` ends here: releases the hold if it is held. Rejects with
   * the LockLost if it was lost, so that the work done under it is known to
   * have run without it; a hold already unlocked is left alone.
   */
  async [Symbol.asyncDispose]() {
    if (this.state === 'held') await this.unlock();
    else if (this.state === 'lost') throw this.error;
  }
}
