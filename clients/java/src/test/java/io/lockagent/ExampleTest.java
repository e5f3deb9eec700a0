package io.lockagent;

import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;

/** The example (the README's snippet), compiled against the jar by test.sh, runs against the agent. */
public class ExampleTest {
    @Test
    public void theQuickstartRunsAgainstTheDevAgent() throws Exception {
        String cp = System.getProperty("lockagent.jar") + ":" + System.getProperty("lockagent.examples");
        ProcessBuilder pb = new ProcessBuilder(System.getProperty("java.home") + "/bin/java", "-cp", cp, "Quickstart")
                .redirectErrorStream(true);
        pb.environment().put("LOCK_AGENT_SOCKET", Agents.shared().socket);
        Process p = pb.start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        Check.that(p.waitFor(30, TimeUnit.SECONDS), "the example did not end");
        Check.equal(0, p.exitValue(), "exit code; output:\n" + out);
        Check.that(out.matches("(?s)jobs/nightly held, fence \\d+\njobs/report held, fence \\d+\n"), "output:\n" + out);
    }
}
