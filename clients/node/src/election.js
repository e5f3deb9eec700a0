// A leader election shaped as etcd's concurrency.Election (Go), for code
// written against it: campaign, proclaim, resign, leader, observe and rev.
import { ConnectionClosed, LockLost, NoLeader, NotHeld, NotLeader } from './errors.js';
import { checkName } from './wire.js';

// Each client's candidates, by name: every Election of one name on one
// client is one candidate, as etcd's Elections of one prefix on one Session.
const candidacies = new WeakMap();

class Candidacy {
  term = undefined; // the Lock of the term held, undefined while not leading
  campaign = undefined; // the campaign under way, a promise, undefined when none is

  /** The term held, if it is still held. */
  leading() {
    if (this.term !== undefined && this.term.state !== 'held') this.term = undefined;
    return this.term;
  }
}

export class Election {
  #client;
  #options;
  #state;

  /**
   * The election of name through client. options are lock()'s (ttl, delay,
   * signal is per campaign), given to every campaign.
   */
  constructor(client, name, options = {}) {
    this.name = checkName(name);
    this.#client = client;
    this.#options = options;
    let byName = candidacies.get(client);
    if (byName === undefined) candidacies.set(client, byName = new Map());
    if (!byName.has(this.name)) byName.set(this.name, new Candidacy());
    this.#state = byName.get(this.name);
  }

  /**
   * Runs for leader with value; resolves once elected (rejects with Busy if
   * options.wait ran out, with the signal's reason if options.signal
   * aborted: the candidacy is then withdrawn). If this candidate leads
   * already it resolves at once, after proclaiming value if it differs (if
   * that fails, the term is resigned and the error thrown). A campaign
   * while another of this candidate's is under way waits for it first.
   */
  async campaign(value, options = {}) {
    const st = this.#state;
    for (;;) {
      const term = st.leading();
      if (term !== undefined) {
        if (term.value === value) return;
        try {
          await this.proclaim(value);
        } catch (err) {
          await this.resign();
          throw err;
        }
        return;
      }
      if (st.campaign === undefined) break;
      await st.campaign.catch(() => {});
    }
    const campaign = this.#client.campaign(this.name, value, { ...this.#options, ...options });
    st.campaign = campaign;
    try {
      st.term = await campaign;
    } finally {
      st.campaign = undefined;
    }
  }

  /** Replaces the leader's value without another election; rejects with NotLeader if this candidate does not lead. */
  async proclaim(value) {
    const term = this.#state.leading();
    if (term === undefined) throw new NotLeader(`${this.name}: not leading`);
    try {
      await term.proclaim(value);
    } catch (err) {
      if (!(err instanceof NotHeld || err instanceof LockLost)) throw err;
      if (this.#state.term === term) this.#state.term = undefined;
      throw new NotLeader(`${this.name}: not leading: ${err.message}`);
    }
  }

  /**
   * Ends this candidate's term, so that the next is elected. Resolves at
   * once if it does not lead (a second resign is fine); a term lost
   * meanwhile has ended all the same.
   */
  async resign() {
    const st = this.#state;
    const term = st.term;
    if (term === undefined) return;
    try {
      await term.unlock();
    } catch (err) {
      if (!(err instanceof NotHeld || err instanceof LockLost || err instanceof ConnectionClosed)) throw err;
    }
    if (st.term === term) st.term = undefined;
  }

  /** Who leads now, as read after the call began; rejects with NoLeader if nobody does. */
  async leader(options = {}) {
    const got = await this.#client.leader(this.name, options);
    if (got.none) throw new NoLeader(`${this.name}: no leader`);
    return got;
  }

  /**
   * An async iterable of who leads: the leader as read after the call
   * began, then every new leader and new value, in order; while nobody
   * leads it waits for the next (as etcd's Observe). Ends when
   * options.signal aborts or the loop breaks.
   */
  async* observe(options = {}) {
    for await (const l of await this.#client.observe(this.name, options)) {
      if (!l.none) yield l;
    }
  }

  /** This candidate's term (its hold's fence) while it leads, else 0. */
  get rev() { return this.#state.leading()?.fence ?? 0; }

  /** The Lock of this candidate's term while it leads, else undefined. */
  get lock() { return this.#state.leading(); }
}
