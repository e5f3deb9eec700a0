package io.lockagent;

import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.WeakHashMap;
import java.util.concurrent.CompletableFuture;

/**
 * A leader election on one name, shaped as etcd's concurrency.Election (Go) for code written
 * against it: {@link #campaign}, {@link #proclaim}, {@link #resign}, {@link #leader},
 * {@link #observe} and {@link #rev} (the term, a fence). A term is a fair lock of the name
 * carrying the leader's value ({@link LockAgentClient#campaign}).
 *
 * <p>As etcd's: every Election of one name on one client is one candidate (as etcd's on one
 * Session); a campaign while it leads returns at once, proclaiming a new value; resign when not
 * leading does nothing; leader with nobody leading throws {@link NoLeaderException}; proclaim
 * when not leading throws {@link NotLeaderException}; observe yields leaders only. Where it
 * differs: resign sends its release whatever interrupts come (as {@link Hold#unlock}); rev is the
 * term, not an etcd revision; there is no ResumeElection.
 */
public final class Election {
    /** A client's candidate for one name, shared by its Elections. */
    private static final class Candidacy {
        Hold term; // the term held, null while not leading: under this
        CompletableFuture<Void> campaign; // the campaign under way, null when none is: under this

        Hold leading() {
            if (term != null && !term.isHeld()) {
                term = null;
            }
            return term;
        }
    }

    private static final Map<LockAgentClient, Map<String, Candidacy>> CANDIDACIES = new WeakHashMap<>();

    private final LockAgentClient client;
    private final String name;
    private final LockOptions options;
    private final Candidacy state;

    /** The election of name through client. */
    public Election(LockAgentClient client, String name) {
        this(client, name, LockOptions.defaults());
    }

    /** The election of name through client; every campaign takes options (waitFor bounds it). */
    public Election(LockAgentClient client, String name, LockOptions options) {
        this.client = client;
        this.name = Args.name(name);
        this.options = options;
        synchronized (CANDIDACIES) {
            state = CANDIDACIES.computeIfAbsent(client, c -> new HashMap<>()).computeIfAbsent(this.name, n -> new Candidacy());
        }
    }

    public String name() {
        return name;
    }

    /**
     * Runs for leader with value and returns once elected ({@link BusyException} if the options'
     * waitFor ran out). If this candidate leads already it returns at once, after proclaiming value
     * if it differs (if that fails, the term is resigned and the exception thrown). A campaign
     * while another of this candidate's is under way waits for it first.
     */
    public void campaign(String value) throws InterruptedException {
        CompletableFuture<Void> done;
        while (true) {
            Hold term;
            CompletableFuture<Void> underWay;
            synchronized (state) {
                term = state.leading();
                underWay = state.campaign;
                if (term == null && underWay == null) {
                    done = state.campaign = new CompletableFuture<>();
                    break;
                }
            }
            if (term != null) {
                if (!term.value().equals(value)) {
                    try {
                        proclaim(value);
                    } catch (RuntimeException e) {
                        resign();
                        throw e;
                    }
                }
                return;
            }
            try {
                underWay.get();
            } catch (java.util.concurrent.ExecutionException e) {
                // that campaign failed: this one runs its own
            }
        }
        Hold term = null;
        try {
            term = client.campaign(name, value, options);
        } finally {
            synchronized (state) {
                state.term = term;
                state.campaign = null;
            }
            done.complete(null);
        }
    }

    /** Replaces the leader's value without another election; {@link NotLeaderException} if this candidate does not lead. */
    public void proclaim(String value) {
        Hold term;
        synchronized (state) {
            term = state.leading();
        }
        if (term == null) {
            throw new NotLeaderException("lockagent: election " + name + ": not leader");
        }
        try {
            term.proclaim(value);
        } catch (NotHeldException | LockLostException e) {
            forget(term);
            throw new NotLeaderException("lockagent: election " + name + ": not leader: " + e.getMessage(), e);
        }
    }

    /**
     * Ends this candidate's term, so that the next is elected. Does nothing if it does not lead
     * (a second resign is fine); a term lost meanwhile has ended all the same.
     */
    public void resign() {
        Hold term;
        synchronized (state) {
            term = state.term;
        }
        if (term == null) {
            return;
        }
        try {
            term.unlock();
        } catch (NotHeldException | LockLostException | ConnectionClosedException e) {
            // ended all the same
        }
        forget(term);
    }

    private void forget(Hold term) {
        synchronized (state) {
            if (state.term == term) {
                state.term = null;
            }
        }
    }

    /** Who leads now, as the agent read it after the call began; {@link NoLeaderException} if nobody does. */
    public Leader leader() {
        Leader l = client.leader(name);
        if (l.none()) {
            throw new NoLeaderException("lockagent: election " + name + ": no leader");
        }
        return l;
    }

    /**
     * Who leads: the leader as read after the call began, then every new leader and new value, in
     * order; while nobody leads it waits for the next (as etcd's Observe). Close it to stop.
     */
    public Leaders observe() {
        return new Leaders(client.observe(name));
    }

    /** This candidate's term (its hold's fence) while it leads, else 0. */
    public long rev() {
        synchronized (state) {
            Hold term = state.leading();
            return term == null ? 0 : term.fence();
        }
    }

    /** The hold of this candidate's term while it leads, else null. */
    public Hold hold() {
        synchronized (state) {
            return state.leading();
        }
    }

    /** An {@link Observation} without the "nobody leads" pushes. */
    public static final class Leaders implements AutoCloseable {
        private final Observation observation;

        Leaders(Observation observation) {
            this.observation = observation;
        }

        /** The next leader, waiting for it. */
        public Leader next() throws InterruptedException {
            while (true) {
                Leader l = observation.next();
                if (!l.none()) {
                    return l;
                }
            }
        }

        /** The next leader, or null if none came within timeout. */
        public Leader poll(Duration timeout) throws InterruptedException {
            long deadline = System.nanoTime() + timeout.toNanos();
            while (true) {
                Leader l = observation.poll(Duration.ofNanos(Math.max(deadline - System.nanoTime(), 0)));
                if (l == null || !l.none()) {
                    return l;
                }
            }
        }

        @Override
        public void close() {
            observation.close();
        }
    }
}
