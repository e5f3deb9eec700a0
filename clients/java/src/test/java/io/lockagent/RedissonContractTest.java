package io.lockagent;

import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Redisson's contracts where the API is Redisson's (RLock, RReadWriteLock), against the real
 * agent: a lost lock's unlock is an IllegalMonitorStateException and the thread may lock again at
 * once; tryLock refuses what it can refuse; isLocked is anyone in any mode; forceUnlock,
 * remainTimeToLive, isHeldByThread; hash-tag names; the agent's lease bounds.
 */
public class RedissonContractTest {
    @Test
    public void anExpiredLocksUnlockIsAnIllegalMonitorStateAndTheThreadLocksAgain() throws Exception {
        try (LockAgentClient c = Agents.shared().connect()) {
            AgentLock lock = c.getLock("java/rc/expired");
            lock.lock(100, TimeUnit.MILLISECONDS);
            lock.hold().lost().get(3, TimeUnit.SECONDS);
            Check.equal(0, lock.getHoldCount(), "hold count once the lease ran out");
            Check.that(!lock.isHeldByCurrentThread(), "held by the thread once the lease ran out");
            IllegalMonitorStateException e = Check.throwsA(IllegalMonitorStateException.class, lock::unlock,
                    "unlock of an expired lock");
            Check.that(e.getCause() instanceof LockLostException, "the cause is not the LockLostException: " + e.getCause());
            Check.equal("expired", ((LockLostException) e.getCause()).reason(), "reason");
            Check.throwsA(IllegalMonitorStateException.class, lock::unlock, "a second unlock");

            // Redisson acquires again at once, without an unlock first.
            lock.lock(100, TimeUnit.MILLISECONDS);
            lock.hold().lost().get(3, TimeUnit.SECONDS);
            Check.that(lock.tryLock(), "tryLock after the lease ran out");
            Check.equal(1, lock.getHoldCount(), "hold count of the new hold");
            lock.unlock();
            Check.throwsA(IllegalMonitorStateException.class, lock::unlock, "unlock of nothing");
            lock.lock(100, TimeUnit.MILLISECONDS);
            lock.hold().lost().get(3, TimeUnit.SECONDS);
            lock.lock(); // lock() too
            Check.that(lock.isHeldByCurrentThread(), "locked again");
            lock.unlock();
        }
    }

    @Test
    public void tryLockOfTheWriteLockByAReaderReturnsFalse() throws Exception {
        try (LockAgentClient c = Agents.shared().connect()) {
            AgentReadWriteLock rw = c.getReadWriteLock("java/rc/upgrade");
            rw.readLock().lock();
            try {
                Check.that(!rw.writeLock().tryLock(), "tryLock() of the write lock by a reader");
                Check.that(!rw.writeLock().tryLock(50, TimeUnit.MILLISECONDS), "tryLock(time) of the write lock by a reader");
                Check.that(!rw.writeLock().tryLock(50, 1000, TimeUnit.MILLISECONDS), "tryLock(wait, lease) of the write lock by a reader");
                Check.equal(0, rw.writeLock().getHoldCount(), "write hold count");
            } finally {
                rw.readLock().unlock();
            }
        }
    }

    @Test
    public void isLockedSaysWhetherAnyoneHoldsTheNameInAnyMode() throws Exception {
        try (LockAgentClient a = Agents.shared().connect(); LockAgentClient b = Agents.shared().connect()) {
            AgentReadWriteLock mine = a.getReadWriteLock("java/rc/islocked");
            AgentReadWriteLock theirs = b.getReadWriteLock("java/rc/islocked");
            Check.that(!theirs.readLock().isLocked() && !theirs.writeLock().isLocked(), "locked while free");
            mine.writeLock().lock();
            mine.readLock().lock();
            Check.that(theirs.readLock().isLocked(), "readLock().isLocked() while a writer holds the read lock too");
            Check.that(theirs.writeLock().isLocked(), "writeLock().isLocked() while a writer holds it");
            mine.writeLock().unlock();
            Check.that(theirs.readLock().isLocked() && theirs.writeLock().isLocked(), "isLocked while a reader holds it");
            mine.readLock().unlock();
            Check.that(!theirs.readLock().isLocked() && !b.getLock("java/rc/islocked").isLocked(), "locked once free");
        }
    }

    @Test
    public void forceUnlockEndsTheHoldWhereverItIs() throws Exception {
        try (LockAgentClient a = Agents.shared().connect(); LockAgentClient b = Agents.shared().connect()) {
            AgentLock mine = a.getLock("java/rc/force");
            AgentLock theirs = b.getLock("java/rc/force");
            Check.that(!theirs.forceUnlock(), "forceUnlock of a free name");
            mine.lock();
            Hold h = mine.hold();
            Check.that(theirs.forceUnlock(), "forceUnlock of a held name");
            Check.equal("revoked", h.lost().get(3, TimeUnit.SECONDS).reason(), "the holder's loss");
            Check.that(theirs.tryLock(), "the name after forceUnlock");
            Check.that(mine.tryLock(1, TimeUnit.MILLISECONDS) == false, "the revoked thread got in beside the new holder");
            theirs.unlock();
            Check.throwsA(IllegalMonitorStateException.class, mine::unlock, "unlock of a revoked lock");
        }
    }

    @Test
    public void remainTimeToLiveCountsFromTheCurrentValidity() throws Exception {
        try (LockAgentClient c = Agents.shared().connect()) {
            AgentLock lock = c.getLock("java/rc/ttl");
            Check.equal(-2L, lock.remainTimeToLive(), "remainTimeToLive of a free name");
            lock.lock(10, TimeUnit.SECONDS);
            long left = lock.remainTimeToLive();
            Check.that(left > 8_000 && left <= 10_000, "remainTimeToLive of a 10s lease just granted: " + left);
            lock.unlock();
            lock.lock();
            left = lock.remainTimeToLive();
            Check.that(left > 0, "remainTimeToLive of a watchdog hold: " + left);
            AtomicLong other = new AtomicLong();
            Thread t = new Thread(() -> other.set(lock.remainTimeToLive()));
            t.start();
            t.join();
            Check.that(other.get() > 0, "remainTimeToLive seen from another thread of the client: " + other.get());
            lock.unlock();
        }
    }

    @Test
    public void validityCountsRenewals() throws Exception {
        Duration lease = Duration.ofMillis(1000);
        Agents.Agent agent = Agents.overRedis(lease);
        try (LockAgentClient c = agent.connect()) {
            AgentLock lock = c.getLock("java/rc/renewed");
            lock.lock();
            Hold h = lock.hold();
            long granted = System.nanoTime();
            // Time passing is what is under test: three leases, so the grant's validity is long gone
            // and only renewals keep the hold valid.
            Thread.sleep(3 * lease.toMillis());
            Check.that(h.isHeld(), "the watchdog let the hold go");
            Check.that(System.nanoTime() - granted > 3 * lease.toNanos(), "slept less than three leases");
            Check.that(h.validity().compareTo(Duration.ZERO) > 0, "validity of a renewed hold: " + h.validity());
            Check.that(lock.remainTimeToLive() > 0, "remainTimeToLive of a renewed hold: " + lock.remainTimeToLive());
            lock.unlock();
        } finally {
            agent.kill();
        }
    }

    @Test
    public void isHeldByThreadNamesTheHoldingThread() throws Exception {
        try (LockAgentClient c = Agents.shared().connect()) {
            AgentLock lock = c.getLock("java/rc/byid");
            long me = Thread.currentThread().getId();
            Check.that(!lock.isHeldByThread(me), "held before lock");
            lock.lock();
            Check.that(lock.isHeldByThread(me), "not held by the locking thread");
            AtomicBoolean seen = new AtomicBoolean();
            AtomicReference<Long> otherId = new AtomicReference<>();
            Thread t = new Thread(() -> {
                seen.set(c.getLock("java/rc/byid").isHeldByThread(me));
                otherId.set(Thread.currentThread().getId());
            });
            t.start();
            t.join();
            Check.that(seen.get(), "another thread does not see the holding thread");
            Check.that(!lock.isHeldByThread(otherId.get()), "held by a thread that never locked");
            lock.unlock();
            Check.that(!lock.isHeldByThread(me), "held after unlock");
        }
    }

    @Test
    public void hashTagNamesAreAccepted() throws Exception {
        try (LockAgentClient a = Agents.shared().connect(); LockAgentClient b = Agents.shared().connect()) {
            AgentLock mine = a.getLock("{test}:abc:key");
            Check.equal("{test}:abc:key", mine.getName(), "name");
            mine.lock();
            Check.equal("{test}:abc:key", mine.hold().name(), "the hold's name");
            Check.that(!b.getLock("{test}:abc:key").tryLock(), "a second holder of a hash-tag name");
            Check.that(b.getLock("{test}:abc:other").tryLock(), "another name of the same tag is another lock");
            Check.that(!b.getLock("test:abc:key").isLocked(), "the name without braces is another name");
            mine.unlock();
            try (Hold h = a.lock("{x}y+z", LockOptions.defaults().waitFor(Duration.ZERO))) {
                Check.equal("{x}y+z", h.name(), "a name with braces and a +");
            }
            Check.throwsA(InvalidNameException.class, () -> a.getLock("a+7Bb"), "a name that reads as an encoded brace");
            try (Hold leader = a.campaign("{svc}:api", "v1")) {
                Leader l = b.leader("{svc}:api");
                Check.equal("{svc}:api", l.name(), "the leader's name");
                Check.equal(leader.fence(), l.fence(), "the leader's term");
            }
        }
    }

    @Test
    public void leaseBoundsAreTheAgents() throws Exception {
        try (LockAgentClient c = Agents.shared().connect()) {
            AgentLock lock = c.getLock("java/rc/bounds");
            Check.throwsA(InvalidArgumentException.class, () -> lock.lock(49, TimeUnit.MILLISECONDS), "a 49ms lease");
            Check.throwsA(InvalidArgumentException.class, () -> LockOptions.defaults().ttl(Duration.ofMillis(49)), "a 49ms ttl");
            lock.lock(50, TimeUnit.MILLISECONDS);
            lock.hold().lost().get(3, TimeUnit.SECONDS);
            try (Hold h = c.lock("java/rc/bounds2", LockOptions.defaults().ttl(Duration.ofMillis(50)))) {
                Check.throwsA(InvalidArgumentException.class, () -> h.extend(Duration.ofMillis(49)), "a 49ms extend");
            } catch (LockLostException expired) {
                // it may have ended by the time close() unlocks it
            }
        }
    }
}
