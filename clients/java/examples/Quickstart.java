import io.lockagent.AgentLock;
import io.lockagent.Hold;
import io.lockagent.LockAgentClient;
import io.lockagent.LockOptions;
import java.time.Duration;
import java.util.concurrent.TimeUnit;

// Compile and run against `lock-agent run -dev` (see clients/java/README.md):
//   javac -cp lockagent.jar Quickstart.java && java -cp lockagent.jar:. Quickstart
public class Quickstart {
    public static void main(String[] args) throws Exception {
        try (LockAgentClient client = LockAgentClient.connect()) { // $LOCK_AGENT_SOCKET, or the -dev socket
            AgentLock lock = client.getLock("jobs/nightly"); // a java.util.concurrent.locks.Lock, as Redisson's RLock
            if (lock.tryLock(5, TimeUnit.SECONDS)) {
                try {
                    lock.hold().onLost(lost -> System.err.println("lost: " + lost.reason()));
                    System.out.println("jobs/nightly held, fence " + lock.fence());
                } finally {
                    lock.unlock(); // throws LockLostException if the lock was lost meanwhile
                }
            }
            try (Hold hold = client.lock("jobs/report", LockOptions.defaults().waitFor(Duration.ofSeconds(5)))) {
                System.out.println("jobs/report held, fence " + hold.fence());
            } // released here; BusyException if not granted within 5s
        }
    }
}
