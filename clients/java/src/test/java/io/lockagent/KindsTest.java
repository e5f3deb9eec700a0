package io.lockagent;

import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

/** Read/write locks, semaphores, multi-locks and fair locks against the real agent (-dev). */
public class KindsTest {
    @Test
    public void readersShareWritersExcludeAndAWriterDowngrades() throws Exception {
        try (LockAgentClient a = Agents.shared().connect(); LockAgentClient b = Agents.shared().connect()) {
            AgentReadWriteLock mine = a.getReadWriteLock("java/rw");
            AgentReadWriteLock theirs = b.getReadWriteLock("java/rw");
            mine.readLock().lock();
            Check.that(inThread(() -> theirs.readLock().tryLock() && unlocked(theirs.readLock())), "a second reader was refused");
            Check.that(inThread(() -> !theirs.writeLock().tryLock()), "a writer got in with a reader");
            mine.readLock().unlock();

            mine.writeLock().lock();
            Check.that(inThread(() -> !theirs.readLock().tryLock()), "a reader got in with a writer");
            mine.readLock().lock(); // the writer reads too
            mine.writeLock().unlock(); // downgrade: a reader now
            Check.that(mine.readLock().isHeldByCurrentThread() && !mine.writeLock().isHeldByCurrentThread(), "downgraded");
            Check.that(inThread(() -> theirs.readLock().tryLock() && unlocked(theirs.readLock())), "no reader after the downgrade");
            Check.that(mine.readLock().isLocked() && mine.writeLock().isLocked(), "isLocked (anyone, any mode) of a name held shared");
            mine.readLock().unlock();
            Check.that(inThread(() -> theirs.writeLock().tryLock() && unlocked(theirs.writeLock())), "the name stayed held");
        }
    }

    @Test
    public void aSemaphoreGrantsItsPermitsOnDistinctSlots() throws Exception {
        try (LockAgentClient c = Agents.shared().connect()) {
            AgentSemaphore s = c.getSemaphore("java/sem", 2);
            Hold p1 = s.acquire();
            Hold p2 = s.tryAcquire(1, TimeUnit.SECONDS);
            Check.that(p2 != null, "second permit");
            Check.equal(Set.of(1, 2), new HashSet<>(List.of(p1.slot(), p2.slot())), "slots");
            Check.that(s.tryAcquire() == null, "a third permit of two");
            Check.equal(0, s.availablePermits(), "available");
            Check.throwsA(ConflictException.class, () -> c.getSemaphore("java/sem", 3).tryAcquire(), "another limit");
            s.release(p1);
            try (Hold p3 = s.tryAcquire(Duration.ofSeconds(1))) {
                Check.equal(p1.slot(), p3.slot(), "the freed slot");
            }
            p2.close();
        }
    }

    @Test
    public void aMultiLockTakesAllItsNamesOrNone() throws Exception {
        try (LockAgentClient a = Agents.shared().connect(); LockAgentClient b = Agents.shared().connect()) {
            AgentMultiLock both = a.getMultiLock("java/m1", "java/m2");
            Hold m2 = b.lock("java/m2");
            Check.that(!both.tryLock(100, TimeUnit.MILLISECONDS), "granted with one name held elsewhere");
            Check.that(!a.getLock("java/m1").isLocked(), "a failed multi-lock left java/m1 held");
            m2.unlock();
            Check.that(both.tryLock(1, TimeUnit.SECONDS), "the multi-lock");
            Check.equal(2, both.holds().size(), "holds");
            Check.that(both.holds().get(0).fence() > 0 && both.isLocked(), "fences");
            Check.that(inThread(() -> !b.getLock("java/m1").tryLock() && !b.getLock("java/m2").tryLock()), "a name was free");
            both.unlock();
            Check.that(!both.isLocked(), "released");
        }
    }

    @Test
    public void aFairLockIsGrantedInArrivalOrder() throws Exception {
        try (LockAgentClient a = Agents.shared().connect(); LockAgentClient b = Agents.shared().connect()) {
            AgentLock first = a.getFairLock("java/fair");
            first.lock();
            List<Hold> order = new java.util.concurrent.CopyOnWriteArrayList<>();
            Thread[] waiters = new Thread[3];
            for (int i = 0; i < waiters.length; i++) {
                String owner = "w" + i;
                waiters[i] = new Thread(() -> {
                    try {
                        Hold h = b.lock("java/fair", LockOptions.defaults().fair().owner(owner));
                        order.add(h);
                        h.unlock();
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                });
                waiters[i].start();
                int want = i + 1;
                Check.eventually(Duration.ofSeconds(5), () -> queuedOf(a, "java/fair") >= want, () -> "not queued: " + owner);
            }
            first.unlock();
            for (Thread t : waiters) {
                t.join();
            }
            Check.equal(List.of("w0", "w1", "w2"), order.stream().map(Hold::owner).toList(), "grant order");
        }
    }

    private static int queuedOf(LockAgentClient c, String name) {
        return Integer.parseInt(c.connection().call("WHO " + name).orThrow(name).fields.getOrDefault("queued", "0"));
    }

    private static boolean unlocked(AgentLock l) {
        l.unlock();
        return true;
    }

    /** Runs cond in another thread (another owner) and returns what it said. */
    static boolean inThread(java.util.function.BooleanSupplier cond) throws InterruptedException {
        AtomicBoolean result = new AtomicBoolean();
        Thread t = new Thread(() -> result.set(cond.getAsBoolean()));
        t.start();
        t.join();
        return result.get();
    }
}
