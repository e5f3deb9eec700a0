package io.lockagent;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/** Campaign, proclaim, observe and leader, and the etcd-shaped Election, against the real agent (-dev, and over redis-servers). */
public class ElectionTest {
    @Test
    public void observersSeeEveryLeaderAndValueInOrder() throws Exception {
        try (LockAgentClient a = Agents.shared().connect(); LockAgentClient b = Agents.shared().connect();
             Observation watch = b.observe("java/elect")) {
            Check.that(next(watch).none(), "a leader before any campaign");
            Hold leader = a.campaign("java/elect", "host a:80");
            Leader seen = next(watch);
            Check.equal(new Leader("java/elect", false, leader.fence(), "host a:80", seen.agent()), seen, "leader");
            Check.equal(seen, b.leader("java/elect"), "leader()");
            leader.proclaim("host a:81");
            Check.equal("host a:81", next(watch).value(), "proclaimed value");

            CompletableFuture<Hold> second = CompletableFuture.supplyAsync(() -> {
                try {
                    return b.campaign("java/elect", "host b", LockOptions.defaults().waitFor(Duration.ofSeconds(10)));
                } catch (InterruptedException e) {
                    throw new IllegalStateException(e);
                }
            });
            leader.unlock(); // resign
            Leader after = next(watch);
            if (after.none()) {
                after = next(watch);
            }
            Hold b2 = second.get(10, TimeUnit.SECONDS);
            Check.equal("host b", after.value(), "the next leader's value");
            Check.that(after.fence() > leader.fence(), "terms increase: " + after.fence() + " after " + leader.fence());
            b2.unlock();
            Check.that(next(watch).none(), "a leader after everyone resigned");
        }
    }

    /**
     * Issue 31: while the agent observes the name already, a leader resigns, the next candidate's
     * campaign returns, and only then a fresh leader() is asked: it must name the new leader.
     */
    @Test
    public void aFreshLeaderAfterAHandOverIsTheNewLeader() throws Exception {
        Agents.Agent agent = Agents.overRedis(Duration.ofSeconds(15));
        try (LockAgentClient watcher = agent.connect(); LockAgentClient asker = agent.connect();
             LockAgentClient a = agent.connect(); LockAgentClient b = agent.connect();
             Observation watch = watcher.observe("java/handover")) {
            Check.that(next(watch).none(), "a leader before any campaign"); // the agent observes the name now
            LockAgentClient[] candidates = {a, b};
            Hold lead = a.campaign("java/handover", "first");
            int stale = 0;
            for (int i = 0; i < 20; i++) {
                LockAgentClient next = candidates[(i + 1) % 2];
                String value = "c" + i;
                CompletableFuture<Hold> elected = CompletableFuture.supplyAsync(() -> campaign(next, "java/handover", value));
                awaitWaiters(asker, 1);
                lead.unlock();
                Hold h = elected.get(30, TimeUnit.SECONDS);
                if (asker.leader("java/handover").fence() != h.fence()) {
                    stale++;
                }
                lead = h;
            }
            Check.equal(0, stale, "fresh leader() calls that named a term that had ended, of 20");
        } finally {
            agent.kill();
        }
    }

    /** close() says QUIT and returns once the agent closed the connection (not after its 10s grace). */
    @Test
    public void closeSaysQuitAndReturnsWhenTheAgentCloses() throws Exception {
        try (FakeAgent fake = new FakeAgent()) {
            LockAgentClient c = LockAgentClient.connect(fake.path);
            long start = System.nanoTime();
            c.close();
            long took = (System.nanoTime() - start) / 1_000_000;
            Check.equal(1, fake.quits.get(), "QUITs the agent read");
            Check.that(took < 5000, "close() took " + took + "ms");
            Check.that(c.isClosed(), "closed");
        }
    }

    /** Issue 31: close() returned before the agent had released. */
    @Test
    public void closeReturnsOnceTheAgentReleased() throws Exception {
        Agents.Agent agent = Agents.overRedis(Duration.ofSeconds(15));
        try (LockAgentClient asker = agent.connect()) {
            int held = 0;
            for (int i = 0; i < 20; i++) {
                LockAgentClient c = agent.connect();
                for (int j = 0; j < 5; j++) {
                    c.lock("java/close" + i + "/" + j);
                }
                c.close();
                for (int j = 0; j < 5; j++) {
                    held += asker.who("java/close" + i + "/" + j).size();
                }
            }
            Check.equal(0, held, "locks WHO found held after close() returned, of 100");
        } finally {
            agent.kill();
        }
    }

    /** The Election's etcd semantics; etcd's TestElectionSessionRecampaign and ExampleElection_Campaign. */
    @Test
    public void electionAsEtcdUsersExpectIt() throws Exception {
        try (LockAgentClient c = Agents.shared().connect(); LockAgentClient other = Agents.shared().connect()) {
            Election e = new Election(c, "java/semantics");
            Check.throwsA(NoLeaderException.class, e::leader, "leader() with nobody leading");
            Check.that(c.leader("java/semantics").none(), "the old leader() keeps its shape");
            e.resign(); // not leading: nothing to do
            Check.throwsA(NotLeaderException.class, () -> e.proclaim("x"), "proclaim when not leading");
            Check.equal(0L, e.rev(), "rev before any campaign");
            e.campaign("one");
            long rev = e.rev();
            Check.that(rev > 0, "rev once elected");
            e.campaign("one"); // leading already: at once
            e.campaign("two"); // leading already: proclaims
            Check.equal(rev, e.rev(), "the same term");
            Check.equal("two", e.leader().value(), "the value campaigned again with");
            e.proclaim("three");
            Check.equal("three", new Election(other, "java/semantics").leader().value(), "proclaimed, seen elsewhere");
            Election same = new Election(c, "java/semantics");
            same.campaign("four"); // another Election on the same client is the same candidate
            Check.equal(rev, same.rev(), "the same candidate's term");
            try (Election.Leaders leaders = e.observe()) {
                Leader l = leaders.poll(Duration.ofSeconds(5));
                Check.that(l != null && l.value().equals("four") && l.fence() == rev, "observed " + l);
            }
            Election rival = new Election(other, "java/semantics");
            CompletableFuture<Void> won = CompletableFuture.runAsync(() -> {
                try {
                    rival.campaign("rival");
                } catch (InterruptedException ex) {
                    throw new IllegalStateException(ex);
                }
            });
            awaitWaiters(c, 1);
            Check.that(!won.isDone(), "the rival won while e leads");
            e.resign();
            e.resign(); // a second resign is fine
            won.get(10, TimeUnit.SECONDS);
            Check.equal(0L, e.rev(), "rev after resign");
            Check.that(rival.rev() > rev, "the rival's term " + rival.rev() + " after " + rev);
            Check.equal("rival", e.leader().value(), "the next leader");
            Check.throwsA(NotLeaderException.class, () -> e.proclaim("x"), "proclaim after resign");
            rival.resign();
            Check.throwsA(NoLeaderException.class, e::leader, "leader() after everyone resigned");
        }
    }

    private static Hold campaign(LockAgentClient c, String name, String value) {
        try {
            return c.campaign(name, value);
        } catch (InterruptedException e) {
            throw new IllegalStateException(e);
        }
    }

    /** Waits until the agent has n waiting LOCKs (STATUS is all there is to watch). */
    private static void awaitWaiters(LockAgentClient c, int n) throws InterruptedException {
        Check.eventually(Duration.ofSeconds(10),
                () -> Integer.parseInt(c.connection().call("STATUS").orThrow("").fields.get("waiters")) >= n,
                () -> "the agent never had " + n + " waiters");
    }

    private static Leader next(Observation o) throws InterruptedException {
        Leader l = o.poll(Duration.ofSeconds(5));
        Check.that(l != null, "no leader push within 5s");
        return l;
    }
}
