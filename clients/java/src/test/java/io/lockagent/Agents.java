package io.lockagent;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;

/**
 * Runs the real agent for the tests: the binary built from this repository (-Dlockagent.binary),
 * in -dev mode (embedded masters), or over three real redis-servers on free loopback ports
 * (to stop masters). Everything started is stopped by {@link #stopAll}, and at exit.
 */
final class Agents {
    static final String BINARY = System.getProperty("lockagent.binary", "lock-agent");
    private static final List<Process> PROCESSES = new ArrayList<>();
    private static final List<Path> DIRS = new ArrayList<>();
    private static Agent shared;

    static {
        Runtime.getRuntime().addShutdownHook(new Thread(Agents::stopAll));
    }

    private Agents() {}

    /** A running agent. */
    static final class Agent {
        final Process process;
        final String socket;
        final List<Process> masters;

        Agent(Process process, String socket, List<Process> masters) {
            this.process = process;
            this.socket = socket;
            this.masters = masters;
        }

        LockAgentClient connect() {
            return LockAgentClient.connect(socket);
        }

        void kill() throws InterruptedException {
            process.destroyForcibly().waitFor();
        }
    }

    /** The -dev agent the tests share, started once. */
    static synchronized Agent shared() throws IOException, InterruptedException {
        if (shared == null) {
            shared = dev();
        }
        return shared;
    }

    /** A -dev agent of its own, for a test that kills it. */
    static Agent dev() throws IOException, InterruptedException {
        Path dir = tempDir("lagj");
        ProcessBuilder pb = new ProcessBuilder(BINARY, "run", "-dev").redirectError(ProcessBuilder.Redirect.DISCARD);
        pb.environment().put("XDG_RUNTIME_DIR", dir.toString());
        Process p = start(pb);
        BufferedReader out = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
        String prefix = "export LOCK_AGENT_SOCKET=";
        for (String line; (line = out.readLine()) != null; ) {
            if (line.startsWith(prefix)) {
                drain(out);
                Agent a = new Agent(p, line.substring(prefix.length()), List.of());
                awaitMastersUp(a.socket);
                return a;
            }
        }
        throw new IOException("the -dev agent printed no socket");
    }

    /**
     * An agent over three new redis-servers, bootstrapped (so they sit out no quarantine), with a
     * short lease so that a test of losing masters is quick.
     */
    static Agent overRedis(Duration lease) throws IOException, InterruptedException {
        Path dir = tempDir("lagr");
        List<Process> masters = new ArrayList<>();
        StringBuilder cfg = new StringBuilder();
        String socket = dir.resolve("agent.sock").toString();
        cfg.append("agent {\n  id = \"java-test\"\n}\nsocket {\n  path = \"").append(socket).append("\"\n}\n");
        for (int i = 0; i < 3; i++) {
            int port = startRedis(dir, masters);
            cfg.append("redis \"m").append(i).append("\" {\n  address = \"127.0.0.1:").append(port).append("\"\n}\n");
        }
        cfg.append("lock {\n  lease = \"").append(lease.toMillis()).append("ms\"\n  master_timeout = \"50ms\"\n}\n");
        Path config = dir.resolve("agent.hcl");
        Files.writeString(config, cfg);
        Process boot = new ProcessBuilder(BINARY, "bootstrap", "-config", config.toString()).redirectErrorStream(true).start();
        String said = new String(boot.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (boot.waitFor() != 0 || !said.contains("bootstrapped as a new master")) {
            throw new IOException("bootstrap: " + said);
        }
        Process p = start(new ProcessBuilder(BINARY, "run", "-config", config.toString())
                .redirectOutput(ProcessBuilder.Redirect.DISCARD).redirectError(dir.resolve("agent.log").toFile()));
        // The socket file appears at bind, a moment before the agent listens: wait for a connection.
        Check.eventually(Duration.ofSeconds(10), () -> listens(socket), () -> "nothing listens at " + socket);
        awaitMastersUp(socket);
        return new Agent(p, socket, masters);
    }

    /** Starts a redis-server on a free loopback port, no persistence; returns the port. */
    private static int startRedis(Path dir, List<Process> masters) throws IOException, InterruptedException {
        for (int attempt = 0; attempt < 5; attempt++) {
            int port;
            try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
                port = s.getLocalPort();
            }
            Process p = start(new ProcessBuilder("redis-server", "--port", Integer.toString(port), "--bind", "127.0.0.1",
                    "--dir", dir.toString(), "--save", "", "--appendonly", "no", "--protected-mode", "no",
                    "--loglevel", "warning").redirectOutput(ProcessBuilder.Redirect.DISCARD)
                    .redirectError(ProcessBuilder.Redirect.DISCARD));
            long deadline = System.nanoTime() + Duration.ofSeconds(5).toNanos();
            while (p.isAlive() && System.nanoTime() < deadline) {
                if (answers(port)) {
                    masters.add(p);
                    return port;
                }
                Thread.sleep(10); // a poll: redis-server sends no signal when it listens
            }
            p.destroyForcibly().waitFor(); // the port was taken meanwhile: another one
        }
        throw new IOException("could not start redis-server");
    }

    private static boolean answers(int port) {
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress("127.0.0.1", port), 200);
            OutputStream o = s.getOutputStream();
            o.write("PING\r\n".getBytes(StandardCharsets.US_ASCII));
            byte[] b = new byte[7];
            return s.getInputStream().read(b) > 0 && new String(b, StandardCharsets.US_ASCII).startsWith("+PONG");
        } catch (IOException e) {
            return false;
        }
    }

    private static boolean listens(String socket) {
        if (!Files.exists(Path.of(socket))) {
            return false;
        }
        try {
            LockAgentClient.connect(socket).close();
            return true;
        } catch (ConnectException e) {
            return false;
        }
    }

    /** Waits until the agent has found every master up (its first health probes), asking STATUS. */
    private static void awaitMastersUp(String socket) throws InterruptedException {
        try (LockAgentClient c = LockAgentClient.connect(socket)) {
            String[] last = {""};
            Check.eventually(Duration.ofSeconds(10), () -> {
                Reply r = c.connection().call("STATUS");
                last[0] = r.data.toString();
                return !r.data.isEmpty() && r.data.stream().allMatch((Map<String, String> m) -> "up".equals(m.get("state")));
            }, () -> "the agent's masters never all came up: " + last[0]);
        }
    }

    private static Process start(ProcessBuilder pb) throws IOException {
        Process p = pb.start();
        synchronized (PROCESSES) {
            PROCESSES.add(p);
        }
        return p;
    }

    private static void drain(BufferedReader out) {
        Thread t = new Thread(() -> {
            try {
                while (out.readLine() != null) {
                    // the agent's stdout is read so that it never blocks on a full pipe
                }
            } catch (IOException ignored) {
                // the agent is gone
            }
        });
        t.setDaemon(true);
        t.start();
    }

    private static Path tempDir(String prefix) throws IOException {
        Path d = Files.createTempDirectory(Path.of("/tmp"), prefix); // short: a socket path has at most 107 bytes
        synchronized (DIRS) {
            DIRS.add(d);
        }
        return d;
    }

    /** Stops every process started and removes the temporary directories. */
    static void stopAll() {
        List<Process> ps;
        synchronized (PROCESSES) {
            ps = new ArrayList<>(PROCESSES);
            PROCESSES.clear();
        }
        for (Process p : ps) {
            try {
                p.destroyForcibly().waitFor();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        List<Path> ds;
        synchronized (DIRS) {
            ds = new ArrayList<>(DIRS);
            DIRS.clear();
        }
        for (Path d : ds) {
            try (var walk = Files.walk(d)) {
                walk.sorted(Comparator.reverseOrder()).map(Path::toFile).forEach(File::delete);
            } catch (IOException ignored) {
                // best effort
            }
        }
    }

}
