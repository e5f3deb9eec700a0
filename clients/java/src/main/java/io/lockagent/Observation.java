package io.lockagent;

import java.time.Duration;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * One {@link LockAgentClient#observe} of a name: the {@link Leader} as the agent read it after the
 * call began first, then every change of leader or of its value, in order (terms never go back).
 * Nothing is dropped for a slow reader. Close it to stop; observations of one name on one client
 * share one observation at the agent.
 */
public final class Observation implements AutoCloseable {
    private static final Leader CLOSED = new Leader("", true, -1, "closed", "");
    private static final Leader GONE = new Leader("", true, -1, "gone", "");

    private final Observers observers;
    private final String name;
    private final LinkedBlockingQueue<Leader> queue = new LinkedBlockingQueue<>();
    boolean answered; // its OBSERVE was answered (pushes before may predate it): under the Observers' lock
    boolean wantsNext; // the next push comes here even if it repeats the last: under the Observers' lock

    Observation(Observers observers, String name) {
        this.observers = observers;
        this.name = name;
    }

    public String name() {
        return Args.userName(name);
    }

    void offer(Leader l) {
        queue.add(l);
    }

    /** The connection is gone: next() throws once the queue is read. */
    void gone() {
        queue.add(GONE);
    }

    /** The next leader, waiting for it. Throws {@link ConnectionClosedException} once the connection is gone, IllegalStateException once closed. */
    public Leader next() throws InterruptedException {
        return check(queue.take());
    }

    /** The next leader, or null if none came within timeout. */
    public Leader poll(Duration timeout) throws InterruptedException {
        Leader l = queue.poll(timeout.toNanos(), TimeUnit.NANOSECONDS);
        return l == null ? null : check(l);
    }

    Leader nextUninterruptibly() {
        boolean interrupted = false;
        try {
            while (true) {
                try {
                    return next();
                } catch (InterruptedException e) {
                    interrupted = true;
                }
            }
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    private Leader check(Leader l) {
        if (l == GONE || l == CLOSED) {
            queue.add(l); // every later call says the same
            if (l == GONE) {
                throw new ConnectionClosedException("observing " + name);
            }
            throw new IllegalStateException("lockagent: the observation of " + name + " is closed");
        }
        return l;
    }

    /** Stops observing (UNOBSERVE once the last observation of the name on this client closes). */
    @Override
    public void close() {
        observers.leave(this);
        queue.add(CLOSED);
    }
}
