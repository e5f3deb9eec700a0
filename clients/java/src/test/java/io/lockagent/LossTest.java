package io.lockagent;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Holds report their loss: the agent killed, or a majority of its masters gone (within a lease of
 * the masters stopping, with 500ms for the scheduling of a machine shared by many).
 */
public class LossTest {
    @Test
    public void aKilledAgentEndsEveryHold() throws Exception {
        Agents.Agent agent = Agents.dev();
        try (LockAgentClient c = agent.connect()) {
            List<Hold> holds = new ArrayList<>();
            holds.add(c.lock("k1"));
            holds.addAll(c.lockAll(List.of("k2", "k3"), LockOptions.defaults()));
            AgentLock lock = c.getLock("k4");
            lock.lock();
            holds.add(lock.hold());
            agent.kill();
            for (Hold h : holds) {
                LockLostException lost = h.lost().get(2, TimeUnit.SECONDS);
                Check.equal("disconnected", lost.reason(), h.name() + " reason");
                Check.that(!h.isHeld(), h.name() + " still held");
            }
            Check.that(Check.throwsA(IllegalMonitorStateException.class, lock::unlock, "unlock of a lock lost with the agent")
                    .getCause() instanceof LockLostException, "the cause is not the LockLostException");
            Check.throwsA(ConnectionClosedException.class, () -> c.lock("k5"), "lock after the agent died");
            Check.throwsA(ConnectionClosedException.class, c::ping, "ping after the agent died");
            Check.that(c.isClosed(), "the client is not closed");
        }
    }

    @Test
    public void twoOfThreeMastersStoppedLoseTheHoldWithinALease() throws Exception {
        Duration lease = Duration.ofMillis(1500);
        Agents.Agent agent = Agents.overRedis(lease);
        try (LockAgentClient c = agent.connect()) {
            AgentLock lock = c.getLock("java/quorum");
            lock.lock();
            Hold h = lock.hold();
            long stopped = System.nanoTime();
            for (Process master : agent.masters.subList(0, 2)) {
                master.destroyForcibly().waitFor();
            }
            LockLostException lost = h.lost().get(lease.toMillis() + 2000, TimeUnit.MILLISECONDS);
            long took = (System.nanoTime() - stopped) / 1_000_000;
            Check.equal("quorum", lost.reason(), "reason");
            Check.that(took <= lease.toMillis() + 500, "lost after " + took + "ms, more than a lease");
            System.out.println("     the loss came " + took + "ms after two of three masters stopped (lease " + lease.toMillis() + "ms)");
            Check.that(Check.throwsA(IllegalMonitorStateException.class, lock::unlock, "unlock of a lost lock")
                    .getCause() instanceof LockLostException, "the cause is not the LockLostException");
            Check.throwsA(NoQuorumException.class, () -> c.lock("java/quorum2", LockOptions.defaults().waitFor(Duration.ZERO)),
                    "a lock with one master of three");
        } finally {
            agent.kill();
        }
    }
}
