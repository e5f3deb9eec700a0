// Elections as observers see them: one OBSERVE per name per connection,
// shared by every observe() and leader() of it, fed by * LEADER pushes.
import { ConnectionClosed } from './errors.js';
import { decodeValue, fields, int } from './wire.js';

/** A * LEADER push's words after LEADER: the name, then `none` or its fields. */
export function leaderOf(words) {
  const [name, ...rest] = words;
  if (rest[0] === 'none') return { name, none: true, fence: 0, value: undefined, agent: undefined };
  const f = fields(rest);
  return { name, none: false, fence: int(f.fence), value: f.value === undefined ? undefined : decodeValue(f.value), agent: f.agent };
}

const same = (a, b) => a !== undefined && a.none === b.none && a.fence === b.fence && a.value === b.value &&
  a.agent === b.agent;

/** One consumer of a name's pushes: a queue, so that no change is dropped while it is not reading. */
class Observer {
  queue = [];
  wake = null;
  ended = null; // the error that ends it, once it ended
  wantsNext = false; // the next push comes to it even if it repeats the last (after its own OBSERVE)

  push(leader) {
    this.queue.push(leader);
    this.wake?.();
  }

  end(err) {
    this.ended ??= err;
    this.wake?.();
  }

  /** The next leader; rejects with what ended the observer once its queue is empty. */
  async next() {
    while (this.queue.length === 0) {
      if (this.ended) throw this.ended;
      await new Promise((resolve) => { this.wake = resolve; });
      this.wake = null;
    }
    return this.queue.shift();
  }
}

export class Observations {
  #conn;
  #names = new Map(); // name -> { ready: Promise, observers: Set<Observer>, last }
  #leaving = new Map(); // name -> its UNOBSERVE, which a new OBSERVE of it must follow

  constructor(conn) { this.#conn = conn; }

  /** Routes a * LEADER push to the observers of its name. */
  push(leader) {
    const obs = this.#names.get(leader.name);
    if (obs === undefined) return;
    const repeat = same(obs.last, leader);
    obs.last = leader;
    for (const o of obs.observers) {
      if (!repeat || o.wantsNext) o.push(leader);
      o.wantsNext = false;
    }
  }

  /** Ends every observer: the connection is gone. */
  closeAll() {
    for (const obs of this.#names.values()) for (const o of obs.observers) o.end(new ConnectionClosed());
    this.#names.clear();
  }

  /**
   * Adds an observer of name. `fresh`: it wants the state the agent pushes
   * after an OBSERVE of its own (leader()); else it starts with the last
   * push known, if any. Resolves once the agent accepted the OBSERVE.
   */
  async join(name, fresh) {
    await this.#leaving.get(name);
    const o = new Observer();
    let obs = this.#names.get(name);
    if (obs === undefined) {
      obs = { observers: new Set([o]), last: undefined };
      this.#names.set(name, obs);
      obs.ready = this.#conn.do(`OBSERVE ${name}`);
    } else {
      obs.observers.add(o);
      if (fresh) {
        await this.#ask(name, o);
      } else if (obs.last !== undefined) {
        o.push(obs.last);
      }
    }
    try {
      await obs.ready;
    } catch (err) {
      this.leave(name, o);
      throw err;
    }
    return o;
  }

  async #ask(name, o) {
    try {
      await this.#conn.send(`OBSERVE ${name}`, (r) => { o.wantsNext = r.kind === 'OK'; }).reply;
    } catch (err) {
      this.leave(name, o);
      throw err;
    }
  }

  /** Removes an observer; the last one of a name ends its OBSERVE. */
  leave(name, o) {
    const obs = this.#names.get(name);
    o.end(new ConnectionClosed('the observation ended'));
    if (obs === undefined || !obs.observers.delete(o) || obs.observers.size > 0) return;
    this.#names.delete(name);
    const done = obs.ready.then(() => this.#conn.do(`UNOBSERVE ${name}`)).catch(() => {});
    this.#leaving.set(name, done);
    done.then(() => { if (this.#leaving.get(name) === done) this.#leaving.delete(name); });
  }
}
