package io.lockagent;

import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * One acquisition of a lock, semaphore slot or leadership, held while the client's connection is
 * open (the agent renews it) until {@link #unlock()} or {@link #close()}: use it in
 * try-with-resources. Pass {@link #fence()} to what the hold protects.
 *
 * <p>When the agent reports the hold lost, or the connection drops, {@link #lost()} completes with
 * the {@link LockLostException} (listeners run on the client's event thread, never on the thread
 * that reads the socket), and {@code unlock()} then throws it.
 */
public final class Hold implements AutoCloseable {
    private static final RuntimeException UNLOCKED = new RuntimeException("unlocked");

    private final LockAgentClient client;
    private final String name;
    private final String owner;
    private final String unlockMode; // "" or " mode=exclusive": what this hold's UNLOCK undoes
    private final Duration ttl; // null: none (the agent keeps the hold while connected)
    private final CompletableFuture<LockLostException> lost = new CompletableFuture<>();
    private final AtomicBoolean unlocking = new AtomicBoolean();

    private final Object mu = new Object();
    private long fence;
    private int count;
    private int slot;
    private long validityMillis;
    private long grantedAt; // System.nanoTime() when validity was reported
    private long ttlEnd; // System.nanoTime() at which a ttl hold ends (its grant or last extend, plus the ttl)
    private RuntimeException end; // null while held; UNLOCKED, or the LockLostException
    private String value;
    private volatile Runnable onWanted;

    /** name: as on the wire (see Args.name); ttl: the LOCK's, or null. */
    Hold(LockAgentClient client, String name, String owner, String unlockMode, String value, Duration ttl) {
        this.client = client;
        this.name = name;
        this.owner = owner;
        this.unlockMode = unlockMode;
        this.value = value;
        this.ttl = ttl;
    }

    void grant(Map<String, String> f) {
        synchronized (mu) {
            fence = parse(f.get("fence"));
            count = (int) parse(f.get("count"));
            slot = (int) parse(f.get("slot"));
            validityMillis = parse(f.get("validity"));
            grantedAt = System.nanoTime();
            if (ttl != null) {
                ttlEnd = grantedAt + ttl.toNanos();
            }
        }
    }

    private static long parse(String s) {
        try {
            return s == null ? 0 : Long.parseLong(s);
        } catch (NumberFormatException e) {
            return 0;
        }
    }

    /** Ends the hold as lost (from the reader thread: the listeners run on the event thread). */
    void lose(String reason, String why) {
        if (reason.equals("disconnected") && unlocking.get()) {
            // The UNLOCK was sent; the closed connection released the hold just as well.
            end(UNLOCKED);
            return;
        }
        end(new LockLostException(name(), owner, fence(), reason, why));
    }

    private void end(RuntimeException why) {
        synchronized (mu) {
            if (end != null) {
                return;
            }
            end = why;
        }
        if (why instanceof LockLostException) {
            client.events().execute(() -> lost.complete((LockLostException) why));
        } else {
            lost.cancel(false);
        }
    }

    void want() {
        Runnable r = onWanted;
        if (r != null) {
            client.events().execute(r);
        }
    }

    /** The name, as given (a hash-tag name with its braces). */
    public String name() { return Args.userName(name); }

    /** The name as the agent has it. */
    String wireName() { return name; }

    public String owner() { return owner; }

    /** The fencing token: strictly greater than every earlier grant's of this name, by any agent. */
    public long fence() {
        synchronized (mu) {
            return fence;
        }
    }

    /** The re-entry count at the grant (1 unless the owner re-entered). */
    public int count() {
        synchronized (mu) {
            return count;
        }
    }

    /** A semaphore hold's slot, 1 to its limit; 0 for a lock. Fence a semaphore's resource per slot. */
    public int slot() {
        synchronized (mu) {
            return slot;
        }
    }

    /**
     * How long the hold is still known valid on a majority of masters, renewals counted: asks the
     * agent (HOLDS), which renews it. Zero once unlocked or lost; if the connection is gone, what
     * is left of the last validity the agent reported.
     */
    public Duration validity() {
        if (!isHeld()) {
            return Duration.ZERO;
        }
        Reply r;
        try {
            r = client.connection().call("HOLDS").orThrow(name);
        } catch (ConnectionClosedException e) {
            synchronized (mu) {
                long left = validityMillis - (System.nanoTime() - grantedAt) / 1_000_000;
                return Duration.ofMillis(Math.max(left, 0));
            }
        }
        for (Map<String, String> d : r.data) {
            if (name.equals(d.get("name")) && owner.equals(d.get("owner"))) {
                long v = parse(d.get("validity"));
                synchronized (mu) {
                    validityMillis = v;
                    grantedAt = System.nanoTime();
                }
                return Duration.ofMillis(v);
            }
        }
        return Duration.ZERO; // gone: its LOST is on its way
    }

    /**
     * Milliseconds the hold lasts yet: for a ttl hold, the time to its end (the agent renews it
     * until then); else its current {@link #validity()}. 0 once unlocked or lost.
     */
    long remainMillis() {
        synchronized (mu) {
            if (end != null) {
                return 0;
            }
            if (ttlEnd != 0) {
                return Math.max((ttlEnd - System.nanoTime()) / 1_000_000, 0);
            }
        }
        return validity().toMillis();
    }

    /** True until unlocked or lost. */
    public boolean isHeld() {
        synchronized (mu) {
            return end == null;
        }
    }

    /**
     * Completes with the {@link LockLostException} when the hold is lost; cancelled (so
     * {@code isDone()}, and no listener runs) when it is unlocked.
     */
    public CompletableFuture<LockLostException> lost() {
        return lost;
    }

    /** Runs listener (on the client's event thread) if the hold is lost. */
    public void onLost(java.util.function.Consumer<LockLostException> listener) {
        lost.thenAccept(listener);
    }

    /** Runs listener (on the event thread) each time the agent says a conflicting request waits; needs notifyWanted(). */
    public void onWanted(Runnable listener) {
        onWanted = listener;
    }

    /** The value as given to the options or {@link #proclaim}; "" if none. */
    public String value() {
        synchronized (mu) {
            return value;
        }
    }

    /** Throws what an operation on an ended hold must throw: NotHeldException after unlock, else why it ended. */
    void checkHeld() {
        RuntimeException e;
        synchronized (mu) {
            e = end;
        }
        if (e == UNLOCKED) {
            throw new NotHeldException("lockagent: NOT_HELD: " + name + " was already unlocked");
        }
        if (e instanceof LockLostException) {
            throw ((LockLostException) e).rethrown();
        }
        if (e != null) {
            throw e;
        }
    }

    /**
     * Releases this acquisition. Waits for the agent's answer whatever interrupts come (a release
     * in a finally block of an interrupted thread still releases). Throws the
     * {@link LockLostException} if the hold was lost before, {@link NotHeldException} if it was
     * already unlocked. A connection that closed meanwhile released it: no exception.
     */
    public void unlock() {
        checkHeld();
        unlocking.set(true);
        Reply r;
        try {
            r = Connection.await(client.connection().send("UNLOCK " + name + " owner=" + owner + unlockMode));
        } catch (ConnectionClosedException e) {
            client.connection().closed().join(); // the reader has ended the hold
            return;
        }
        if (r.kind.equals("OK")) {
            client.untrack(this);
            end(UNLOCKED);
            return;
        }
        try {
            r.orThrow(name);
        } catch (NotHeldException e) {
            // Lost before the UNLOCK arrived: its LOST push came first, unless the agent sent none.
            client.untrack(this);
            end(e);
            checkHeld();
        }
    }

    /** {@link #unlock()}, unless already unlocked (then nothing): try-with-resources after an explicit unlock. */
    @Override
    public void close() {
        synchronized (mu) {
            if (end == UNLOCKED) {
                return;
            }
        }
        unlock();
    }

    /** Sets the hold's end to d from now (50ms to 30 days, the agent's bounds) and returns its new validity. */
    public Duration extend(Duration d) {
        checkHeld();
        Args.within("ttl", d, Args.MIN_TTL, Args.MAX_TTL, Args.TTL_BOUNDS);
        long asked = System.nanoTime();
        Reply r = client.connection().call("EXTEND " + name + " ttl=" + Args.millis(d) + " owner=" + owner).orThrow(name);
        synchronized (mu) {
            validityMillis = r.longField("validity");
            grantedAt = System.nanoTime();
            ttlEnd = asked + d.toNanos();
        }
        return Duration.ofMillis(r.longField("validity"));
    }

    /** Replaces the hold's value (a leader's, as observers see it) once a majority of masters has it. */
    public void proclaim(String newValue) {
        checkHeld();
        String enc = Values.checked(newValue);
        client.connection().call("SET " + name + " value=" + enc + " owner=" + owner).orThrow(name);
        synchronized (mu) {
            value = newValue;
        }
    }

    @Override
    public String toString() {
        return "Hold[" + name() + " owner=" + owner + " fence=" + fence() + (slot() > 0 ? " slot=" + slot() : "") + "]";
    }
}
