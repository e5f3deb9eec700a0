package io.lockagent;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.Lock;

/** The client against the real agent (-dev): exclusion, re-entry, cancellation, errors. */
public class ClientTest {
    private static LockAgentClient connect() throws Exception {
        return Agents.shared().connect();
    }

    @Test
    public void twentyThreadsOnOneClientKeepMutualExclusion() throws Exception {
        try (LockAgentClient c = connect(); LockAgentClient other = connect()) {
            Lock[] locks = {c.getLock("java/twenty"), other.getLock("java/twenty")};
            AtomicInteger inside = new AtomicInteger();
            AtomicInteger grants = new AtomicInteger();
            AtomicLong lastFence = new AtomicLong();
            List<Throwable> failures = new java.util.concurrent.CopyOnWriteArrayList<>();
            List<Thread> threads = new ArrayList<>();
            for (int i = 0; i < 20; i++) {
                AgentLock lock = (AgentLock) locks[i % 2]; // two connections, threads of each contending
                threads.add(new Thread(() -> {
                    try {
                        for (int round = 0; round < 5; round++) {
                            // Bounded, so that a broken lock fails the test instead of hanging it.
                            Check.that(lock.tryLock(30, TimeUnit.SECONDS), "not granted within 30s");
                            int in = inside.incrementAndGet();
                            try {
                                Check.equal(1, in, "threads inside the lock");
                                // A round trip while inside, on the connection others wait on:
                                // the window in which a second thread could be let in.
                                (lock == locks[0] ? c : other).ping();
                                long fence = lock.fence();
                                Check.that(fence > lastFence.get(), "fence " + fence + " after " + lastFence.get());
                                lastFence.set(fence);
                                grants.incrementAndGet();
                            } finally {
                                inside.decrementAndGet();
                                lock.unlock();
                            }
                        }
                    } catch (Throwable t) {
                        failures.add(t);
                    }
                }));
            }
            threads.forEach(Thread::start);
            for (Thread t : threads) {
                t.join();
            }
            if (!failures.isEmpty()) {
                throw new AssertionError(failures.size() + " threads failed, the first: " + failures, failures.get(0));
            }
            Check.equal(100, grants.get(), "grants");
        }
    }

    @Test
    public void theOwningThreadReentersAndOthersContend() throws Exception {
        try (LockAgentClient c = connect()) {
            AgentLock lock = c.getLock("java/reenter");
            lock.lock();
            long fence = lock.fence();
            Check.that(lock.tryLock(), "the owner re-enters");
            Check.equal(2, lock.getHoldCount(), "hold count");
            Check.equal(fence, lock.fence(), "a re-entry keeps the fence");
            Check.that(lock.isHeldByCurrentThread() && lock.isLocked(), "held");
            AgentLock same = c.getLock("java/reenter"); // another object of the name: the same lock, as in Redisson
            Check.that(same.tryLock() && same.getHoldCount() == 3, "the same thread through another lock object");
            same.unlock();
            Hold byOwner = c.lock("java/reenter", LockOptions.defaults().owner(lock.hold().owner()).waitFor(Duration.ZERO));
            Check.equal(2, byOwner.count(), "the agent's count of the thread's owner");
            byOwner.unlock();
            Thread other = new Thread(() -> {
                Check.that(!lock.tryLock(), "another thread got a held lock");
                Check.that(!lock.isHeldByCurrentThread(), "another thread thinks it holds it");
                Check.throwsA(IllegalMonitorStateException.class, lock::unlock, "unlock by another thread");
            });
            AtomicReference<Throwable> failed = run(other);
            Check.that(failed.get() == null, "other thread: " + failed.get());
            lock.unlock();
            Check.that(lock.isHeldByCurrentThread(), "still held once");
            lock.unlock();
            Check.that(!lock.isHeldByCurrentThread() && !lock.isLocked(), "released");
            Check.throwsA(IllegalMonitorStateException.class, lock::unlock, "a third unlock");

            Hold a = c.lock("java/owner", LockOptions.defaults().owner("me"));
            Hold b = c.lock("java/owner", LockOptions.defaults().owner("me").waitFor(Duration.ZERO));
            Check.equal(2, b.count(), "re-entry count by owner");
            Check.equal(a.fence(), b.fence(), "re-entry fence by owner");
            b.close();
            a.close();
        }
    }

    private static AtomicReference<Throwable> run(Thread t) throws InterruptedException {
        AtomicReference<Throwable> failed = new AtomicReference<>();
        t.setUncaughtExceptionHandler((th, e) -> failed.set(e));
        t.start();
        t.join();
        return failed;
    }

    @Test
    public void anInterruptedOrTimedOutWaitLeavesNothingHeld() throws Exception {
        try (LockAgentClient holder = connect(); LockAgentClient c = connect()) {
            AgentLock held = holder.getLock("java/cancel");
            AgentLock waiting = c.getLock("java/cancel");
            held.lock();
            Check.that(!waiting.tryLock(100, TimeUnit.MILLISECONDS), "a timed-out wait got the lock");

            CountDownLatch started = new CountDownLatch(1);
            AtomicReference<Throwable> outcome = new AtomicReference<>();
            Thread t = new Thread(() -> {
                try {
                    started.countDown();
                    waiting.lockInterruptibly();
                    outcome.set(new AssertionError("granted while held elsewhere"));
                } catch (InterruptedException e) {
                    outcome.set(e);
                }
            });
            t.start();
            started.await();
            Check.eventually(Duration.ofSeconds(5), () -> waiters(holder, "java/cancel") > 0, () -> "the wait never reached the agent");
            t.interrupt();
            t.join();
            Check.that(outcome.get() instanceof InterruptedException, "lockInterruptibly: " + outcome.get());
            Check.that(!waiting.isHeldByCurrentThread(), "held after the interrupt");
            held.unlock();
            // A wait left at the agent would be granted now, and hold the name for good.
            Check.that(held.tryLock(5, TimeUnit.SECONDS), "an interrupted wait left the lock held");

            // Let the grant race the timeout: release just as the waiter gives up.
            Hold h = holder.lock("java/race");
            for (int i = 0; i < 20; i++) {
                Hold release = h;
                Thread unlocker = new Thread(() -> {
                    sleepQuietly(19);
                    release.unlock();
                });
                unlocker.start();
                AgentLock l = c.getLock("java/race");
                if (l.tryLock(20, TimeUnit.MILLISECONDS)) {
                    l.unlock(); // granted before the wait ran out: ours to release
                }
                unlocker.join();
                h = holder.lock("java/race", LockOptions.defaults().waitFor(Duration.ofSeconds(5)));
            }
            h.unlock();
            held.unlock();
            Check.equal(0, holds(c), "holds of the waiting client after the cancellations");
        }
    }

    private static void sleepQuietly(long ms) {
        try {
            Thread.sleep(ms); // the race under test is with a timer: a grant at about the wait's end
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    static int waiters(LockAgentClient c, String name) {
        String w = c.connection().call("WHO " + name).orThrow(name).fields.getOrDefault("waiting", "0");
        return Integer.parseInt(w);
    }

    static int holds(LockAgentClient c) {
        return c.connection().call("HOLDS").orThrow("").data.size();
    }

    @Test
    public void errorsAreTypedPerWireCode() throws Exception {
        try (LockAgentClient c = connect()) {
            Hold h = c.lock("java/typed");
            Check.throwsA(BusyException.class, () -> c.lock("java/typed", LockOptions.defaults().waitFor(Duration.ZERO)), "busy");
            h.unlock();
            Check.that(h.lost().isCancelled() && !h.isHeld(), "an unlocked hold is not lost");
            NotHeldException e = Check.throwsA(NotHeldException.class, h::unlock, "a second unlock");
            Check.equal("NOT_HELD", e.code(), "code");
            h.close(); // try-with-resources after an explicit unlock: nothing

            AgentReadWriteLock rw = c.getReadWriteLock("java/typed-rw");
            rw.readLock().lock();
            ConflictException conflict = Check.throwsA(ConflictException.class, () -> rw.writeLock().lock(), "upgrade");
            Check.equal("CONFLICT", conflict.code(), "code");
            rw.readLock().unlock();
            Check.throwsA(UnknownVerbException.class, () -> c.connection().call("FROB").orThrow(""), "unknown verb");
        }
    }

    @Test
    public void aTtlHoldEndsAsLostWithReasonExpired() throws Exception {
        try (LockAgentClient c = connect()) {
            Hold h = c.lock("java/ttl", LockOptions.defaults().ttl(Duration.ofMillis(300)));
            LockLostException lost = h.lost().get(5, TimeUnit.SECONDS);
            Check.equal("expired", lost.reason(), "reason");
            Check.equal(h.fence(), lost.fence(), "fence");
            LockLostException thrown = Check.throwsA(LockLostException.class, h::unlock, "unlock of a lost hold");
            Check.equal("expired", thrown.reason(), "reason thrown");

            AgentLock lock = c.getLock("java/ttl-lease");
            Check.that(lock.tryLock(1000, 300, TimeUnit.MILLISECONDS) && lock.tryLock(), "tryLock with a lease, then re-entry");
            lock.hold().lost().get(5, TimeUnit.SECONDS);
            // As Redisson's: once lost, the thread holds nothing, re-entries included.
            IllegalMonitorStateException e = Check.throwsA(IllegalMonitorStateException.class, lock::unlock, "the unlock of a lost lock");
            Check.that(e.getCause() instanceof LockLostException, "the cause: " + e.getCause());
            Check.throwsA(IllegalMonitorStateException.class, lock::unlock, "a second unlock of a lost lock");
            Check.that(!lock.isHeldByCurrentThread(), "still held after both unlocks");
        }
    }

    @Test
    public void theFenceIsCheckedAgainstTheMasters() throws Exception {
        try (LockAgentClient c = connect()) {
            Hold h = c.lock("java/check");
            Check.that(c.check("java/check", h.fence()), "the holder's fence is current");
            Check.that(!c.check("java/check", h.fence() - 1), "an older fence is current");
            h.unlock();
            Check.that(!c.check("java/check", h.fence()), "a released fence is current");
        }
    }

    @Test
    public void nothingAtTheSocketSaysHowToStartAnAgent() {
        ConnectException e = Check.throwsA(ConnectException.class, () -> LockAgentClient.connect("/nonexistent/agent.sock"), "connect");
        Check.that(e.getMessage().contains("lock-agent run -dev") && e.getMessage().contains("LOCK_AGENT_SOCKET"), e.getMessage());
        Check.equal("CONNECT", e.code(), "code");
    }

    @Test
    public void aHoldIsExtendedAndToldWhenWanted() throws Exception {
        try (LockAgentClient c = connect(); LockAgentClient other = connect()) {
            CountDownLatch wanted = new CountDownLatch(1);
            try (Hold h = c.lock("java/wanted", LockOptions.defaults().notifyWanted().ttl(Duration.ofSeconds(30)))) {
                h.onWanted(wanted::countDown);
                Duration v = h.extend(Duration.ofSeconds(60));
                // The validity is what is known valid now: a ttl longer than the lease is renewed.
                Check.that(v.compareTo(Duration.ZERO) > 0 && h.validity().compareTo(Duration.ZERO) > 0, "validity after extend: " + v);
                Check.throwsA(BusyException.class, () -> other.lock("java/wanted", LockOptions.defaults().waitFor(Duration.ofMillis(300))),
                        "a second owner");
                Check.that(wanted.await(5, TimeUnit.SECONDS), "the holder was not told its lock is wanted");
            }
        }
    }
}
