package io.lockagent;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/** Campaign, proclaim, observe and leader against the real agent (-dev). */
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

    private static Leader next(Observation o) throws InterruptedException {
        Leader l = o.poll(Duration.ofSeconds(5));
        Check.that(l != null, "no leader push within 5s");
        return l;
    }
}
