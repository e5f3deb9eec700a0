package io.lockagent;

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.Lock;

/**
 * A {@link Lock} owned by the calling thread, as Redisson's RLock: the thread that locks is the
 * owner (an id numbered once per JVM, never reused), a thread locking it again re-enters (counted
 * here: the agent holds one acquisition per thread), and only the owning thread may unlock.
 *
 * <p>If the hold is lost (the agent could not keep a majority of masters, a ttl ran out, an
 * operator revoked it, the connection dropped), {@link #lost()} completes, and the unlock that
 * ends it throws the {@link LockLostException}.
 */
public abstract class ThreadLock implements Lock {
    private static final AtomicLong THREADS = new AtomicLong();
    private static final ThreadLocal<String> OWNER = ThreadLocal.withInitial(() -> "t" + THREADS.incrementAndGet());
    /** What each thread holds, by lock key: every lock object of one name and kind on one client shares it. */
    private static final ThreadLocal<Map<List<Object>, Held>> HELD = ThreadLocal.withInitial(HashMap::new);

    /** What this thread holds: the holds of one acquisition, and how many times it re-entered. */
    private static final class Held {
        final List<Hold> holds;
        int count = 1;

        Held(List<Hold> holds) {
            this.holds = holds;
        }
    }

    final LockAgentClient client;
    final LockOptions options;
    private final List<Object> key;

    /**
     * kind and names say what is locked: lock objects of the same client, kind and names are one
     * lock to a thread (as Redisson's getLock(name), called twice, gives one lock), so a thread
     * may lock through one and unlock through another.
     */
    ThreadLock(LockAgentClient client, LockOptions options, String kind, List<String> names) {
        this.client = client;
        this.options = options.waitForever();
        this.key = List.of(client, kind, names);
    }

    private Held held() {
        return HELD.get().get(key);
    }

    private void forget() {
        Map<List<Object>, Held> mine = HELD.get();
        mine.remove(key);
        if (mine.isEmpty()) {
            HELD.remove(); // a thread that holds nothing keeps nothing
        }
    }

    /** The request that takes the lock for the calling thread with opts. */
    abstract Acquisition prepare(LockOptions opts);

    /** Releases what one acquisition holds. */
    abstract void release(List<Hold> holds);

    /** Whether anyone, on any agent, holds it. */
    public abstract boolean isLocked();

    /** Waits until granted, whatever interrupts come (they are kept for the thread). */
    @Override
    public void lock() {
        try {
            acquire(options, false);
        } catch (InterruptedException e) {
            throw new AssertionError("an uninterruptible wait was interrupted", e);
        }
    }

    /** {@link #lock()}, the hold ending by itself after leaseTime (-1: kept until unlocked, as in Redisson). */
    public void lock(long leaseTime, TimeUnit unit) {
        try {
            acquire(withLease(options, leaseTime, unit), false);
        } catch (InterruptedException e) {
            throw new AssertionError("an uninterruptible wait was interrupted", e);
        }
    }

    @Override
    public void lockInterruptibly() throws InterruptedException {
        acquire(options, true);
    }

    /** Tries once: true if granted at once. */
    @Override
    public boolean tryLock() {
        try {
            return acquire(options.waitFor(Duration.ZERO), false);
        } catch (InterruptedException e) {
            throw new AssertionError("an uninterruptible wait was interrupted", e);
        }
    }

    /** Waits at most time (0 or less tries once; more than a year waits forever). */
    @Override
    public boolean tryLock(long time, TimeUnit unit) throws InterruptedException {
        return acquire(withWait(options, time, unit), true);
    }

    /** Redisson's: waits at most waitTime; the hold ends by itself after leaseTime (-1: kept until unlocked). */
    public boolean tryLock(long waitTime, long leaseTime, TimeUnit unit) throws InterruptedException {
        return acquire(withLease(withWait(options, waitTime, unit), leaseTime, unit), true);
    }

    private static LockOptions withWait(LockOptions o, long time, TimeUnit unit) {
        Duration d = Duration.ofNanos(unit.toNanos(Math.max(time, 0)));
        return d.compareTo(Args.MAX_WAIT) > 0 ? o.waitForever() : o.waitFor(d);
    }

    private static LockOptions withLease(LockOptions o, long leaseTime, TimeUnit unit) {
        if (leaseTime == -1) {
            return o;
        }
        if (leaseTime <= 0 || unit.toDays(leaseTime) > Args.MAX_TTL.toDays()) {
            throw new InvalidArgumentException("lease", leaseTime + " " + unit, "-1 (none), or 1ms to 30 days");
        }
        return o.ttl(Duration.ofNanos(unit.toNanos(leaseTime)));
    }

    private boolean acquire(LockOptions opts, boolean interruptible) throws InterruptedException {
        Held h = held();
        if (h != null) {
            h.holds.forEach(Hold::checkHeld); // a lost hold is not re-entered
            h.count++;
            return true;
        }
        Acquisition a = prepare(opts.owner(OWNER.get()));
        a.send();
        try {
            if (interruptible) {
                a.awaitInterruptibly();
            } else {
                a.await();
            }
        } catch (BusyException e) {
            return false;
        }
        HELD.get().put(key, new Held(a.holds));
        return true;
    }

    /**
     * Undoes the calling thread's latest lock. The last one releases the hold; it throws the
     * {@link LockLostException} if the hold was lost meanwhile (a re-entry's unlock throws it too).
     * {@link IllegalMonitorStateException} if the thread does not hold it.
     */
    @Override
    public void unlock() {
        Held h = held();
        if (h == null) {
            throw new IllegalMonitorStateException("lockagent: this thread does not hold " + this);
        }
        if (--h.count > 0) {
            h.holds.forEach(Hold::checkHeld);
            return;
        }
        forget();
        release(h.holds);
    }

    /** Whether the calling thread holds it (and it was not lost). */
    public boolean isHeldByCurrentThread() {
        Held h = held();
        return h != null && h.holds.stream().allMatch(Hold::isHeld);
    }

    /** How many times the calling thread holds it (re-entries included); 0 if not. */
    public int getHoldCount() {
        Held h = held();
        return h == null ? 0 : h.count;
    }

    /** The calling thread's holds (one per name), or an empty list. */
    List<Hold> currentHolds() {
        Held h = held();
        return h == null ? List.of() : h.holds;
    }

    /** Conditions are not distributed: unsupported, as in Redisson. */
    @Override
    public Condition newCondition() {
        throw new UnsupportedOperationException("lockagent: a distributed lock has no Condition");
    }
}
