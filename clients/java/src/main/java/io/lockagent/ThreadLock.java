package io.lockagent;

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.Lock;

/**
 * A {@link Lock} owned by the calling thread, as Redisson's RLock: the thread that locks is the
 * owner (an id numbered once per JVM, never reused), a thread locking it again re-enters (counted
 * here: the agent holds one acquisition per thread), and only the owning thread may unlock.
 *
 * <p>If the hold is lost (the agent could not keep a majority of masters, a lease ran out, an
 * operator revoked it, the connection dropped), the thread no longer holds it, as in Redisson once
 * a lease ran out: {@link #getHoldCount()} is 0, {@code lock()} and {@code tryLock()} acquire it
 * anew at once, and an {@code unlock()} throws {@link IllegalMonitorStateException} whose cause is
 * the {@link LockLostException} (once; then it is forgotten).
 */
public abstract class ThreadLock implements Lock {
    private static final AtomicLong THREADS = new AtomicLong();
    private static final ThreadLocal<String> OWNER = ThreadLocal.withInitial(() -> "t" + THREADS.incrementAndGet());
    /** What each thread holds, by lock key: every lock object of one name and kind on one client shares it. */
    private static final ThreadLocal<Map<List<Object>, Held>> HELD = ThreadLocal.withInitial(HashMap::new);
    /**
     * The same acquisitions by lock key, for {@link #isHeldByThread(long)} (other threads'): kept
     * in step with HELD by remember and forget, the only writers of both.
     */
    private static final Map<List<Object>, Set<Held>> BY_KEY = new ConcurrentHashMap<>();

    /** What this thread holds: the holds of one acquisition, and how many times it re-entered. */
    private static final class Held {
        final List<Hold> holds;
        final long threadId = Thread.currentThread().getId();
        int count = 1;

        Held(List<Hold> holds) {
            this.holds = holds;
        }

        /** The loss of one of its holds (unlocked ones aside), or null if every one is held. */
        LockLostException lost() {
            for (Hold h : holds) {
                try {
                    h.checkHeld();
                } catch (LockLostException e) {
                    return e;
                } catch (LockAgentException e) {
                    // unlocked: not a loss
                }
            }
            return null;
        }

        boolean live() {
            return holds.stream().allMatch(Hold::isHeld);
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

    private void remember(Held h) {
        HELD.get().put(key, h);
        BY_KEY.computeIfAbsent(key, k -> ConcurrentHashMap.newKeySet()).add(h);
    }

    private void forget(Held h) {
        Map<List<Object>, Held> mine = HELD.get();
        mine.remove(key);
        if (mine.isEmpty()) {
            HELD.remove(); // a thread that holds nothing keeps nothing
        }
        BY_KEY.computeIfPresent(key, (k, set) -> {
            set.remove(h);
            return set.isEmpty() ? null : set;
        });
    }

    /** An IllegalMonitorStateException for an unlock of a hold that was lost, with the loss as its cause. */
    private IllegalMonitorStateException lostMonitor(LockLostException lost) {
        IllegalMonitorStateException e = new IllegalMonitorStateException(
                "lockagent: this thread no longer holds " + this + ": " + lost.getMessage());
        e.initCause(lost);
        return e;
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

    /**
     * Tries once: true if granted at once; false if someone holds it, or if the thread holds the
     * read lock of a name it asks the write lock of (no upgrade: lock() throws {@link ConflictException}).
     */
    @Override
    public boolean tryLock() {
        try {
            return acquire(options.waitFor(Duration.ZERO), false, true);
        } catch (InterruptedException e) {
            throw new AssertionError("an uninterruptible wait was interrupted", e);
        }
    }

    /** Waits at most time (0 or less tries once; more than a year waits forever). */
    @Override
    public boolean tryLock(long time, TimeUnit unit) throws InterruptedException {
        return acquire(withWait(options, time, unit), true, true);
    }

    /** Redisson's: waits at most waitTime; the hold ends by itself after leaseTime (-1: kept until unlocked). */
    public boolean tryLock(long waitTime, long leaseTime, TimeUnit unit) throws InterruptedException {
        return acquire(withLease(withWait(options, waitTime, unit), leaseTime, unit), true, true);
    }

    private static LockOptions withWait(LockOptions o, long time, TimeUnit unit) {
        Duration d = Duration.ofNanos(unit.toNanos(Math.max(time, 0)));
        return d.compareTo(Args.MAX_WAIT) > 0 ? o.waitForever() : o.waitFor(d);
    }

    private static LockOptions withLease(LockOptions o, long leaseTime, TimeUnit unit) {
        if (leaseTime == -1) {
            return o;
        }
        Duration d = Duration.ofNanos(unit.toNanos(Math.max(leaseTime, 0)));
        if (leaseTime <= 0 || d.compareTo(Args.MIN_TTL) < 0 || d.compareTo(Args.MAX_TTL) > 0) {
            throw new InvalidArgumentException("lease", leaseTime + " " + unit, "-1 (none), or " + Args.TTL_BOUNDS);
        }
        return o.ttl(d);
    }

    private boolean acquire(LockOptions opts, boolean interruptible) throws InterruptedException {
        return acquire(opts, interruptible, false);
    }

    /** refuse: a tryLock, which answers false for a conflict (an upgrade) rather than throw. */
    private boolean acquire(LockOptions opts, boolean interruptible, boolean refuse) throws InterruptedException {
        Held h = held();
        if (h != null) {
            if (h.live()) {
                h.count++;
                return true;
            }
            // Lost (a lease ran out, revoked, ...): the thread holds nothing, and acquires anew,
            // as Redisson's does once its lease ran out. The unlock owed for it is owed no more.
            forget(h);
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
        } catch (ConflictException e) {
            if (refuse) {
                return false;
            }
            throw e;
        }
        remember(new Held(a.holds));
        return true;
    }

    /**
     * Undoes the calling thread's latest lock; the last one releases the hold.
     * {@link IllegalMonitorStateException} if the thread does not hold it, and, with the
     * {@link LockLostException} as its cause, if the hold was lost (every re-entry with it: the
     * names of a multi-lock that are still held are released).
     */
    @Override
    public void unlock() {
        Held h = held();
        if (h == null) {
            throw new IllegalMonitorStateException("lockagent: this thread does not hold " + this);
        }
        LockLostException lost = h.lost();
        if (lost == null && --h.count > 0) {
            return;
        }
        forget(h);
        try {
            release(h.holds);
        } catch (LockLostException e) {
            lost = lost == null ? e : lost;
        }
        if (lost != null) {
            throw lostMonitor(lost);
        }
    }

    /** Whether the calling thread holds it (and it was not lost). */
    public boolean isHeldByCurrentThread() {
        Held h = held();
        return h != null && h.live();
    }

    /** Whether the thread of this id ({@link Thread#getId()}) holds it (and it was not lost), as Redisson's. */
    public boolean isHeldByThread(long threadId) {
        Set<Held> all = BY_KEY.get(key);
        return all != null && all.stream().anyMatch(h -> h.threadId == threadId && h.live());
    }

    /** How many times the calling thread holds it (re-entries included); 0 if not, or if it was lost. */
    public int getHoldCount() {
        Held h = held();
        return h == null || !h.live() ? 0 : h.count;
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
