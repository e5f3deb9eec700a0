// Elections as observers see them: one observation per name per
// connection, shared by every observe() and leader() of it, fed by * LEADER
// pushes. Each call sends an OBSERVE of its own, which the agent answers
// with the leader read after it arrived, and takes no push from before
// that answer: none starts from a term that ended before it was called.
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
  answered = false; // its OBSERVE was answered: pushes before that may predate the call
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
      if (!o.answered) continue;
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
   * Adds an observer of name and sends its OBSERVE; resolves once the agent
   * accepted it. The observer gets the push that answers it, and every
   * change after.
   */
  async join(name) {
    await this.#leaving.get(name);
    const o = new Observer();
    let obs = this.#names.get(name);
    if (obs === undefined) {
      obs = { observers: new Set(), last: undefined };
      this.#names.set(name, obs);
    }
    obs.observers.add(o);
    try {
      const reply = await this.#conn.send(`OBSERVE ${name}`, (r) => {
        o.answered = true;
        o.wantsNext = r.kind === 'OK';
      }).reply;
      const err = reply.error();
      if (err) {
        this.leave(name, o, false);
        throw err;
      }
    } catch (err) {
      this.leave(name, o);
      throw err;
    }
    return o;
  }

  /**
   * Removes an observer; the last one of a name sends UNOBSERVE at once (in
   * line order: a later OBSERVE of the name goes after it), unless
   * `unobserve` is false (its OBSERVE was refused).
   */
  leave(name, o, unobserve = true) {
    const obs = this.#names.get(name);
    o.end(new ConnectionClosed('the observation ended'));
    if (obs === undefined || !obs.observers.delete(o) || obs.observers.size > 0) return;
    this.#names.delete(name);
    if (!unobserve || this.#conn.closed) return;
    const done = this.#conn.do(`UNOBSERVE ${name}`).catch(() => {});
    this.#leaving.set(name, done);
    done.then(() => { if (this.#leaving.get(name) === done) this.#leaving.delete(name); });
  }
}
