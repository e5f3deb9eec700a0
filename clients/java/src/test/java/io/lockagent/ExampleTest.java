package io.lockagent;

import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;

/** The example and the README's snippet, compiled against the jar by test.sh, run against the agent. */
public class ExampleTest {
    @Test
    public void theExampleRunsAgainstTheDevAgent() throws Exception {
        String out = run(System.getProperty("lockagent.examples"));
        Check.that(out.matches("(?s)jobs/nightly held, fence \\d+\njobs/report held, fence \\d+\n"), "output:\n" + out);
    }

    @Test
    public void theReadmeSnippetRunsAgainstTheDevAgent() throws Exception {
        String out = run(System.getProperty("lockagent.readme"));
        Check.that(out.matches("(?s)held, fence \\d+\n"), "output:\n" + out);
    }

    /** Runs Quickstart from classes with the jar, connected to the shared -dev agent; returns its output. */
    private static String run(String classes) throws Exception {
        String cp = System.getProperty("lockagent.jar") + ":" + classes;
        ProcessBuilder pb = new ProcessBuilder(System.getProperty("java.home") + "/bin/java", "-cp", cp, "Quickstart")
                .redirectErrorStream(true);
        pb.environment().put("LOCK_AGENT_SOCKET", Agents.shared().socket);
        Process p = pb.start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        Check.that(p.waitFor(30, TimeUnit.SECONDS), "the example did not end");
        Check.equal(0, p.exitValue(), "exit code; output:\n" + out);
        return out;
    }
}
