package io.lockagent;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The Java client of lock-agent, the per-host daemon that gives local processes distributed locks
 * over a Unix socket. It needs nothing but the JDK (17).
 *
 * <p>One client is one connection, safe for many threads: requests are multiplexed by tag, one
 * reader thread routes replies and pushes. Every hold lives as long as the connection: the agent
 * renews it, and releases everything the moment the connection closes.
 *
 * <pre>{@code
 * try (LockAgentClient client = LockAgentClient.connect()) {
 *     Lock lock = client.getLock("jobs/nightly");   // java.util.concurrent.locks.Lock, re-entrant per thread
 *     if (lock.tryLock(5, TimeUnit.SECONDS)) { try { ... } finally { lock.unlock(); } }
 *     try (Hold h = client.lock("jobs/other", LockOptions.defaults().waitFor(Duration.ofSeconds(5)))) {
 *         doWork(h.fence());
 *     }
 * }
 * }</pre>
 */
public final class LockAgentClient implements AutoCloseable {
    /** Where a system agent listens. */
    public static final String DEFAULT_SOCKET = "/run/lock-agent/agent.sock";

    private static final AtomicLong CLIENTS = new AtomicLong();

    private final Connection connection;
    private final ExecutorService events;
    private final AtomicLong owners = new AtomicLong();
    private final Object mu = new Object();
    private final Map<String, List<Hold>> holds = new HashMap<>(); // by name + " " + owner, under mu
    private final Observers observers;
    private final String session;

    private LockAgentClient(Path path) {
        events = Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, "lockagent-events-" + CLIENTS.incrementAndGet());
            t.setDaemon(true);
            return t;
        });
        observers = new Observers(this);
        try {
            connection = new Connection(path, new Pushes());
        } catch (IOException e) {
            events.shutdown();
            throw new ConnectException("lockagent: cannot connect to the agent at " + path + ": " + e.getMessage()
                    + "; is the agent running? Start one with `lock-agent run -dev`, or set LOCK_AGENT_SOCKET to the socket"
                    + " it prints (without it, clients try " + DEFAULT_SOCKET + ", then " + devSocketPath() + ")", e);
        }
        Reply hello;
        try {
            hello = connection.call("HELLO proto=1 client=java").orThrow("");
        } catch (RuntimeException e) {
            close();
            throw e;
        }
        session = hello.fields.getOrDefault("session", "");
    }

    /** Connects to the agent at {@link #socketPath()}. */
    public static LockAgentClient connect() {
        return connect(socketPath());
    }

    /** Connects to the agent at path and says HELLO; {@link ConnectException} if nothing answers there. */
    public static LockAgentClient connect(String path) {
        return new LockAgentClient(Path.of(path));
    }

    /**
     * Where {@link #connect()} connects: $LOCK_AGENT_SOCKET if set; else {@link #DEFAULT_SOCKET} if
     * something exists there; else the socket of {@code lock-agent run -dev}.
     */
    public static String socketPath() {
        String env = System.getenv("LOCK_AGENT_SOCKET");
        if (env != null && !env.isEmpty()) {
            return env;
        }
        return Files.exists(Path.of(DEFAULT_SOCKET)) ? DEFAULT_SOCKET : devSocketPath();
    }

    /** Where {@code lock-agent run -dev} listens: $XDG_RUNTIME_DIR/lock-agent/agent.sock, else /tmp/lock-agent-UID/agent.sock. */
    public static String devSocketPath() {
        String xdg = System.getenv("XDG_RUNTIME_DIR");
        if (xdg != null && !xdg.isEmpty()) {
            return Path.of(xdg, "lock-agent", "agent.sock").toString();
        }
        String tmp = System.getenv("TMPDIR");
        return Path.of(tmp == null || tmp.isEmpty() ? "/tmp" : tmp, "lock-agent-" + uid(), "agent.sock").toString();
    }

    private static String uid() {
        try {
            return String.valueOf(Files.getAttribute(Path.of("/proc/self"), "unix:uid"));
        } catch (IOException | UnsupportedOperationException | IllegalArgumentException e) {
            return "0";
        }
    }

    /** The agent's id for this connection. */
    public String session() {
        return session;
    }

    /** Checks the agent answers. */
    public void ping() {
        connection.call("PING").orThrow("");
    }

    /**
     * Closes the connection: says QUIT, and the agent releases every hold of it in the masters,
     * then closes it; close returns once it has (at most 10 seconds, then it closes the connection
     * itself), so the locks are released when it returns. Every {@link Hold} reports it lost
     * ("disconnected").
     */
    @Override
    public void close() {
        connection.quit(Duration.ofSeconds(10));
        events.shutdown();
    }

    /** Whether the connection is gone. */
    public boolean isClosed() {
        return connection.isClosed();
    }

    // ---- holds

    /**
     * Takes name (1-200 bytes of [A-Za-z0-9._:/@+-]) with opts and returns the hold. Throws
     * {@link BusyException} when the wait ran out, the agent's errors as their exceptions, and
     * {@link InterruptedException} if the thread is interrupted while waiting: the wait is then
     * cancelled at the agent and a grant that won the race released, so nothing stays held.
     * Arguments are checked before anything is sent.
     */
    public Hold lock(String name, LockOptions opts) throws InterruptedException {
        return lockAll(java.util.Collections.singletonList(name), opts).get(0);
    }

    /** {@link #lock(String, LockOptions)} of a name as on the wire. */
    Hold lockWire(String wireName, LockOptions opts) throws InterruptedException {
        Acquisition a = prepare(List.of(wireName), opts, "");
        a.send();
        a.awaitInterruptibly();
        return a.holds.get(0);
    }

    /** {@link #lock(String, LockOptions)} with the defaults: waits until granted. */
    public Hold lock(String name) throws InterruptedException {
        return lock(name, LockOptions.defaults());
    }

    /**
     * Takes several names at once: all are granted, or none is held (the agent claims them in byte
     * order, so two overlapping multi-locks never deadlock). Returns one hold per name, in the
     * order given, all of one owner; afterwards each is on its own.
     */
    public List<Hold> lockAll(List<String> names, LockOptions opts) throws InterruptedException {
        Acquisition a = prepare(Args.names(names), opts, "");
        a.send();
        a.awaitInterruptibly();
        return a.holds;
    }

    /** A LOCK about to be sent (names: checked, as on the wire): its line and the holds it will grant, tracked before sending so a LOST racing the reply finds them. */
    Acquisition prepare(List<String> names, LockOptions opts, String unlockMode) {
        String owner = opts.owner != null ? opts.owner : "j" + owners.incrementAndGet();
        String line = Args.line("LOCK " + String.join(" ", names) + " owner=" + owner + opts.wire());
        List<Hold> hs = new ArrayList<>();
        for (String n : names) {
            hs.add(new Hold(this, n, owner, unlockMode, opts.value, opts.ttl));
        }
        return new Acquisition(this, line, hs);
    }

    /** A new owner id for a caller that keeps its own (a semaphore permit). */
    String newOwner() {
        return "j" + owners.incrementAndGet();
    }

    void track(Hold h) {
        synchronized (mu) {
            holds.computeIfAbsent(h.wireName() + " " + h.owner(), k -> new ArrayList<>()).add(h);
        }
    }

    void untrack(Hold h) {
        synchronized (mu) {
            String key = h.wireName() + " " + h.owner();
            List<Hold> hs = holds.get(key);
            if (hs != null && hs.remove(h) && hs.isEmpty()) {
                holds.remove(key);
            }
        }
    }

    /** A live hold of this client on name (as on the wire), any owner's; null if none. */
    Hold heldOn(String wireName) {
        synchronized (mu) {
            for (List<Hold> hs : holds.values()) {
                for (Hold h : hs) {
                    if (h.wireName().equals(wireName) && h.isHeld()) {
                        return h;
                    }
                }
            }
        }
        return null;
    }

    // ---- Redisson's objects

    /** A {@link java.util.concurrent.locks.Lock} on name, owned by the calling thread (re-entrant per thread, as RLock). */
    public AgentLock getLock(String name) {
        return new AgentLock(this, Args.name(name), "lock", LockOptions.defaults(), "", "");
    }

    /** {@link #getLock} granted in arrival order, across all agents (fair=true). */
    public AgentLock getFairLock(String name) {
        return new AgentLock(this, Args.name(name), "fair", LockOptions.defaults().fair(), "", "");
    }

    /** A read/write lock on name: many readers, or one writer; a writer may take the read lock (and keep it after unlocking the write lock: a downgrade). */
    public AgentReadWriteLock getReadWriteLock(String name) {
        return new AgentReadWriteLock(this, Args.name(name));
    }

    /** A semaphore of permits (1 to 4096) slots on name; every user of the name must pass the same permits. */
    public AgentSemaphore getSemaphore(String name, int permits) {
        return new AgentSemaphore(this, Args.name(name), Args.limit("permits", permits));
    }

    /** A lock on several names at once, all or none, owned by the calling thread. */
    public AgentMultiLock getMultiLock(String... names) {
        return new AgentMultiLock(this, Args.names(names == null ? null : java.util.Arrays.asList(names)));
    }

    // ---- coordination

    /**
     * Runs for leader of name: a fair lock carrying value, which observers see. Returns once
     * elected; the hold's fence is the term. Resign with unlock/close; {@link Hold#proclaim} changes the value.
     */
    public Hold campaign(String name, String value) throws InterruptedException {
        return campaign(name, value, LockOptions.defaults());
    }

    /** {@link #campaign(String, String)} with opts (waitFor bounds the campaign). */
    public Hold campaign(String name, String value, LockOptions opts) throws InterruptedException {
        return lock(name, opts.fair().value(value));
    }

    /** Watches who leads name: the leader as read after the call began, then every change; close it to stop. */
    public Observation observe(String name) {
        return observers.observe(Args.name(name));
    }

    /**
     * Who leads name now ({@link Leader#none()} when nobody), as the agent read it after the call
     * began: never a term that had ended before.
     */
    public Leader leader(String name) {
        try (Observation o = observers.observe(Args.name(name))) {
            return o.nextUninterruptibly();
        }
    }

    /**
     * Whether fence is the fence of a current holder of name, as a majority of masters records it.
     * For a name cached by another agent, a fence whose holder let go may read current for up to a
     * renewal tick (see docs/protocol.md, CHECK); to refuse a holder the moment it lets go, compare
     * fences.
     */
    public boolean check(String name, long fence) {
        Reply r = connection.call("CHECK " + Args.name(name) + " fence=" + Args.fence(fence)).orThrow(name);
        return "true".equals(r.fields.get("current"));
    }

    /**
     * Ends every hold of name wherever it is (REVOKE); each holder's hold is lost with reason
     * "revoked". Returns how many it ended. The agent refuses it ({@link DeniedException}) without
     * an ACL rule granting "revoke" (or, without an acl block, to any user but root).
     */
    public int revoke(String name) {
        return revokeWire(Args.name(name));
    }

    int revokeWire(String wireName) {
        return (int) connection.call("REVOKE " + wireName).orThrow(wireName).longField("n");
    }

    /** The holders of name, as recorded in the masters (any agent): one map of WHO's fields each (agent, owner, mode, fence, ...). */
    public List<Map<String, String>> who(String name) {
        return holders(Args.name(name));
    }

    /** {@link #who} of a name as on the wire. */
    List<Map<String, String>> holders(String wireName) {
        Reply r = connection.call("WHO " + wireName).orThrow(wireName);
        List<Map<String, String>> out = new ArrayList<>();
        for (Map<String, String> d : r.data) {
            if (d.containsKey("fence")) {
                out.add(d);
            }
        }
        return out;
    }

    // ---- plumbing for the other classes of the package

    Connection connection() {
        return connection;
    }

    ExecutorService events() {
        return events;
    }

    Observers observers() {
        return observers;
    }

    /** Pushes from the reader: LOST and WANTED to the holds of the name and owner, LEADER to the observers. */
    private final class Pushes implements Connection.Pushes {
        @Override
        public void push(List<String> words) {
            if (words.size() < 2) {
                return;
            }
            Map<String, String> f = Reply.fields(words.subList(2, words.size()));
            String key = words.get(1) + " " + f.getOrDefault("owner", "");
            switch (words.get(0)) {
                case "LOST":
                    List<Hold> lost;
                    synchronized (mu) {
                        lost = holds.remove(key);
                    }
                    if (lost != null) {
                        lost.forEach(h -> h.lose(f.getOrDefault("reason", ""), f.getOrDefault("why", "")));
                    }
                    break;
                case "WANTED":
                    List<Hold> wanted;
                    synchronized (mu) {
                        wanted = new ArrayList<>(holds.getOrDefault(key, List.of()));
                    }
                    wanted.forEach(Hold::want);
                    break;
                case "LEADER":
                    observers.push(Leader.of(words.get(1), words.subList(2, words.size()), f));
                    break;
                default:
                    break;
            }
        }

        @Override
        public void closed() {
            List<Hold> all = new ArrayList<>();
            synchronized (mu) {
                holds.values().forEach(all::addAll);
                holds.clear();
            }
            all.forEach(h -> h.lose("disconnected", ""));
            observers.closed();
            events.shutdown(); // after the notices just queued have run
        }
    }
}
