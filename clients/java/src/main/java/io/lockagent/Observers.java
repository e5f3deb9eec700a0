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
 * This client's OBSERVEs: one per name, shared by every {@link Observation} of it. The agent
 * answers each OBSERVE with a push of the current leader, then pushes every change.
 */
final class Observers {
    /** One observed name. */
    private static final class Named {
        final CompletableFuture<Reply> answered = new CompletableFuture<>(); // the first OBSERVE's reply
        final Set<Observation> observations = new LinkedHashSet<>();
        Leader last; // the latest push, for an observation that joins later
    }

    private final LockAgentClient client;
    // Lock order: sendMu, then mu. sendMu orders the OBSERVE and UNOBSERVE lines of the
    // connection with the changes of named they stand for.
    private final Object sendMu = new Object();
    private final Object mu = new Object();
    private final Map<String, Named> named = new HashMap<>(); // under mu
    private boolean closed; // under mu

    Observers(LockAgentClient client) {
        this.client = client;
    }

    /**
     * A new observation of name, once the agent has answered its OBSERVE. A later one starts from
     * the latest push, unless fresh: then it sends its own OBSERVE and gets that one's push.
     */
    Observation observe(String name, boolean fresh) {
        Observation o = new Observation(this, name);
        CompletableFuture<Reply> answered;
        synchronized (sendMu) {
            Named n;
            boolean first;
            synchronized (mu) {
                if (closed) {
                    throw new ConnectionClosedException("observing " + name);
                }
                n = named.get(name);
                first = n == null;
                if (first) {
                    n = new Named();
                    named.put(name, n);
                } else if (!fresh && n.last != null) {
                    o.offer(n.last);
                }
                o.wantsNext = fresh;
                n.observations.add(o);
            }
            answered = first || fresh ? sendObserve(name, n, first, o) : n.answered;
        }
        try {
            awaitUninterruptibly(answered).orThrow(name);
        } catch (RuntimeException e) {
            leave(o);
            throw e;
        }
        return o;
    }

    private CompletableFuture<Reply> sendObserve(String name, Named n, boolean first, Observation o) {
        try {
            // The first OBSERVE's reply is seen in the reader before the push that follows it.
            return client.connection().send("OBSERVE " + name, first ? n.answered::complete : null).reply;
        } catch (RuntimeException e) {
            leave(o);
            throw e;
        }
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

    /** Removes o; the last observation of a name sends UNOBSERVE (not waiting for its answer). */
    void leave(Observation o) {
        synchronized (sendMu) {
            boolean last;
            synchronized (mu) {
                Named n = named.get(o.name());
                if (n == null || !n.observations.remove(o) || !n.observations.isEmpty()) {
                    return;
                }
                named.remove(o.name());
                last = !closed && n.answered.isDone() && "OK".equals(n.answered.getNow(null).kind);
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

    /** Hands a push to the name's observations; one that repeats the last goes only to one that asked for it. */
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
            n.answered.completeExceptionally(new ConnectionClosedException("observing"));
            n.observations.forEach(Observation::gone);
        }
    }
}
