package io.lockagent;

import java.time.Duration;
import java.util.concurrent.TimeUnit;

/**
 * A counting semaphore of permits slots on one name, cluster-wide: at most permits holders at
 * once, each on its own slot ({@link Hold#slot()}, 1 to permits; fence a resource per slot).
 * A permit is a {@link Hold} of its own (not owned by a thread): release it with
 * {@link #release(Hold)} or close it. Every user of the name must pass the same permits; another
 * number is a {@link ConflictException} at once.
 */
public final class AgentSemaphore {
    private final LockAgentClient client;
    private final String name;
    private final int permits;

    AgentSemaphore(LockAgentClient client, String name, int permits) {
        this.client = client;
        this.name = name;
        this.permits = permits;
    }

    private LockOptions options() {
        return LockOptions.defaults().limit(permits).owner(client.newOwner());
    }

    /** Waits until a permit is free; interrupted, nothing is held. */
    public Hold acquire() throws InterruptedException {
        return client.lockWire(name, options());
    }

    /** A permit if one is free at once, else null. */
    public Hold tryAcquire() {
        try {
            return tryAcquire(Duration.ZERO);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt(); // a wait of 0 is answered at once; keep the interrupt
            return null;
        }
    }

    /** A permit within wait, else null. */
    public Hold tryAcquire(Duration wait) throws InterruptedException {
        try {
            return client.lockWire(name, options().waitFor(wait));
        } catch (BusyException e) {
            return null;
        }
    }

    public Hold tryAcquire(long time, TimeUnit unit) throws InterruptedException {
        return tryAcquire(Duration.ofNanos(unit.toNanos(Math.max(time, 0))));
    }

    /** Gives the permit back (as permit.unlock()). */
    public void release(Hold permit) {
        permit.unlock();
    }

    /** Permits not held right now, on any agent. */
    public int availablePermits() {
        return Math.max(permits - client.holders(name).size(), 0);
    }

    public String getName() {
        return Args.userName(name);
    }
}
