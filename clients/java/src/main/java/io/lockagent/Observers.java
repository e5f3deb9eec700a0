package io.lockagent;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;

/**
 * This client's observations: one per name at the agent, shared by every {@link Observation} of
 * it. Each observation sends an OBSERVE of its own, which the agent answers with the leader read
 * after it arrived, then pushes every change; an observation takes no push from before its
 * OBSERVE was answered (it may predate the call).
 */
final class Observers {
    /** One observed name. */
    private static final class Named {
        final Set<Observation> observations = new LinkedHashSet<>();
        Leader last; // the latest push, to tell a change from a repeat
    }

    private final LockAgentClient client;
    // Lock order: sendMu, then mu. sendMu orders the OBSERVE and UNOBSERVE lines of the
    // connection with the changes of named they stand for, so that an UNOBSERVE of an earlier
    // observation never ends a later one's.
    private final Object sendMu = new Object();
    private final Object mu = new Object();
    private final Map<String, Named> named = new HashMap<>(); // under mu
    private boolean closed; // under mu

    Observers(LockAgentClient client) {
        this.client = client;
    }

    /** A new observation of name, once the agent has answered its OBSERVE; it gets the push that follows. */
    Observation observe(String name) {
        Observation o = new Observation(this, name);
        CompletableFuture<Reply> answered;
        synchronized (sendMu) {
            synchronized (mu) {
                if (closed) {
                    throw new ConnectionClosedException("observing " + name);
                }
                named.computeIfAbsent(name, k -> new Named()).observations.add(o);
            }
            try {
                // Seen in the reader before the push that follows it.
                answered = client.connection().send("OBSERVE " + name, r -> {
                    synchronized (mu) {
                        o.answered = true;
                        o.wantsNext = "OK".equals(r.kind);
                    }
                }).reply;
            } catch (RuntimeException e) {
                leave(o, false);
                throw e;
            }
        }
        try {
            awaitUninterruptibly(answered).orThrow(name);
        } catch (RuntimeException e) {
            leave(o, false); // refused (the agent observes nothing for it), or the connection is gone
            throw e;
        }
        return o;
    }

    private static Reply awaitUninterruptibly(CompletableFuture<Reply> f) {
        boolean interrupted = false;
        try {
            while (true) {
                try {
                    return f.get();
                } catch (InterruptedException e) {
                    interrupted = true;
                } catch (ExecutionException e) {
                    throw (RuntimeException) e.getCause();
                }
            }
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /** Removes o; the last observation of a name sends UNOBSERVE at once (not waiting for its answer). */
    void leave(Observation o) {
        leave(o, true);
    }

    private void leave(Observation o, boolean unobserve) {
        synchronized (sendMu) {
            boolean last;
            synchronized (mu) {
                Named n = named.get(o.name());
                if (n == null || !n.observations.remove(o) || !n.observations.isEmpty()) {
                    return;
                }
                named.remove(o.name());
                last = !closed && unobserve;
            }
            if (last) {
                try {
                    client.connection().send("UNOBSERVE " + o.name());
                } catch (ConnectionClosedException e) {
                    // the closed connection ended the OBSERVE
                }
            }
        }
    }

    /**
     * Hands a push to the name's observations whose OBSERVE was answered; one that repeats the
     * last goes only to one that asked for it.
     */
    void push(Leader l) {
        synchronized (mu) {
            Named n = named.get(l.name());
            if (n == null) {
                return;
            }
            boolean repeat = l.equals(n.last);
            n.last = l;
            Leader given = new Leader(Args.userName(l.name()), l.none(), l.fence(), l.value(), l.agent()); // a hash-tag name as given
            for (Observation o : n.observations) {
                if (!o.answered) {
                    continue;
                }
                if (!repeat || o.wantsNext) {
                    o.offer(given);
                }
                o.wantsNext = false;
            }
        }
    }

    /** The connection is gone: every observation ends. */
    void closed() {
        List<Named> all;
        synchronized (mu) {
            closed = true;
            all = new ArrayList<>(named.values());
            named.clear();
        }
        for (Named n : all) {
            n.observations.forEach(Observation::gone);
        }
    }
}
