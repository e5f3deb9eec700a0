package io.lockagent;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Every argument outside protocol v1 is refused before anything is written: the fake agent
 * records what reached it, and only the PING sent after the refusals may be there.
 */
public class ArgumentsTest {
    private static final String LONG_NAME = "n".repeat(201);

    @Test
    public void badArgumentsAreRefusedBeforeAnythingIsSent() throws Exception {
        try (FakeAgent fake = new FakeAgent(); LockAgentClient c = LockAgentClient.connect(fake.path)) {
            String[] badNames = {"", "a b", "a\nb", "x=y", "a;b", "{".repeat(67), "a+7Db", LONG_NAME, "ünï", "a\r", null};
            for (String name : badNames) {
                Check.throwsA(InvalidNameException.class, () -> c.lock(name), "lock(" + name + ")");
                Check.throwsA(InvalidNameException.class, () -> c.getLock(name), "getLock(" + name + ")");
                Check.throwsA(InvalidNameException.class, () -> c.check(name, 1), "check(" + name + ")");
            }
            refused("owner", () -> LockOptions.defaults().owner("me you"));
            refused("owner", () -> LockOptions.defaults().owner("o".repeat(65)));
            refused("owner", () -> LockOptions.defaults().owner("a/b"));
            refused("wait", () -> LockOptions.defaults().waitFor(Duration.ofMillis(-1)));
            refused("wait", () -> LockOptions.defaults().waitFor(Duration.ofDays(366)));
            refused("ttl", () -> LockOptions.defaults().ttl(Duration.ZERO));
            refused("ttl", () -> LockOptions.defaults().ttl(Duration.ofDays(30).plusMillis(1)));
            refused("limit", () -> LockOptions.defaults().limit(0));
            refused("limit", () -> LockOptions.defaults().limit(4097));
            refused("permits", () -> c.getSemaphore("s", 0));
            refused("value", () -> LockOptions.defaults().value("é".repeat(100)));
            refused("delay", () -> LockOptions.defaults().delay(Duration.ofMinutes(5).plusMillis(1)));
            refused("min_hold", () -> LockOptions.defaults().minHold(Duration.ofHours(24).plusMillis(1)));
            refused("fence", () -> c.check("n", 0));
            refused("names", () -> c.getMultiLock());
            refused("names", () -> c.getMultiLock("a", "a"));
            refused("names", () -> c.lockAll(List.of(), LockOptions.defaults()));
            refused("request", () -> c.getMultiLock(manyNames()).lock());
            refused("lease", () -> c.getLock("n").tryLock(0, 0, TimeUnit.SECONDS));
            refused("lease", () -> c.getLock("n").lock(31, TimeUnit.DAYS));
            Check.throwsA(InvalidNameException.class, () -> c.getMultiLock("a", "b c"), "a bad name among several");
            Check.throwsA(InvalidNameException.class, () -> c.observe("a b"), "observe");
            c.ping();
            Check.equal(List.of("PING"), fake.requests(), "what reached the agent");
        }
    }

    @Test
    public void goodArgumentsReachTheAgentAsOneLineEach() throws Exception {
        try (FakeAgent fake = new FakeAgent(); LockAgentClient c = LockAgentClient.connect(fake.path)) {
            LockOptions o = LockOptions.defaults().owner("me").waitFor(Duration.ofNanos(1_500_001)).ttl(Duration.ofDays(30))
                    .shared().fair().value("a b%c").notifyWanted().delay(Duration.ZERO).minHold(Duration.ofSeconds(1));
            try (Hold h = c.lock("jobs/nightly", o)) {
                Check.equal(7L, h.fence(), "fence");
            }
            Check.equal(List.of("LOCK jobs/nightly owner=me wait=2 ttl=2592000000 mode=shared fair=true value=a%20b%25c "
                    + "notify=wanted delay=0 min_hold=1000", "UNLOCK jobs/nightly owner=me"), fake.requests(), "lines");
        }
    }

    private static String[] manyNames() {
        String[] names = new String[40];
        for (int i = 0; i < names.length; i++) {
            names[i] = i + "-" + "n".repeat(100);
        }
        return names;
    }

    private static void refused(String arg, Check.ThrowingRunnable r) {
        InvalidArgumentException e = Check.throwsA(InvalidArgumentException.class, r, arg);
        Check.equal(arg, e.argument(), "the argument named by " + e.getMessage());
    }
}
