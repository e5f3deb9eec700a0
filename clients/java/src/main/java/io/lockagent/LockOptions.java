package io.lockagent;

import java.time.Duration;

/**
 * How to take a lock: immutable, each method returns a changed copy, and each checks its value
 * at once ({@link InvalidArgumentException}), so nothing bad is ever sent.
 *
 * <pre>{@code LockOptions.defaults().waitFor(Duration.ofSeconds(5)).ttl(Duration.ofMinutes(1))}</pre>
 *
 * Without {@code waitFor} a lock waits until granted; without {@code ttl} the agent keeps it
 * for as long as the connection is open.
 */
public final class LockOptions {
    private static final LockOptions DEFAULTS = new LockOptions();

    Duration wait; // null: forever
    Duration ttl; // null: none, the watchdog keeps the hold
    String owner; // null: the client picks one
    boolean shared;
    int limit; // 0: a lock
    boolean fair;
    String value = ""; // as given, encoded on the wire
    boolean notifyWanted;
    Duration delay; // null: the agent's lock.lock_delay
    Duration minHold;

    private LockOptions() {}

    private LockOptions copy() {
        LockOptions o = new LockOptions();
        o.wait = wait;
        o.ttl = ttl;
        o.owner = owner;
        o.shared = shared;
        o.limit = limit;
        o.fair = fair;
        o.value = value;
        o.notifyWanted = notifyWanted;
        o.delay = delay;
        o.minHold = minHold;
        return o;
    }

    /** Wait forever, no ttl, exclusive, not fair. */
    public static LockOptions defaults() {
        return DEFAULTS;
    }

    /** Give up with {@link BusyException} after d (0 tries once; at most a year). */
    public LockOptions waitFor(Duration d) {
        LockOptions o = copy();
        o.wait = Args.within("wait", d, Duration.ZERO, Args.MAX_WAIT, "0 to 1 year (0 tries once; waitForever() for no bound)");
        return o;
    }

    /** Wait until granted (the default). */
    public LockOptions waitForever() {
        LockOptions o = copy();
        o.wait = null;
        return o;
    }

    /** End the hold by itself after d (50ms to 30 days, the agent's bounds), with {@link LockLostException} reason "expired". */
    public LockOptions ttl(Duration d) {
        LockOptions o = copy();
        o.ttl = Args.within("ttl", d, Args.MIN_TTL, Args.MAX_TTL, Args.TTL_BOUNDS);
        return o;
    }

    /** The owner within this connection: 1-64 bytes of [A-Za-z0-9._:-]; the same owner re-enters its hold. */
    public LockOptions owner(String id) {
        LockOptions o = copy();
        o.owner = Args.owner(id);
        return o;
    }

    /** A read hold: many shared holders, no exclusive one. Shared then exclusive is a ConflictException. */
    public LockOptions shared() {
        LockOptions o = copy();
        o.shared = true;
        return o;
    }

    /** A slot of a semaphore of n (1 to 4096) slots; every holder must pass the same n. */
    public LockOptions limit(int n) {
        LockOptions o = copy();
        o.limit = Args.limit("limit", n);
        return o;
    }

    /** Granted in the order the requests arrived, across all agents. */
    public LockOptions fair() {
        LockOptions o = copy();
        o.fair = true;
        return o;
    }

    /** Any text attached to the hold (512 bytes at most once percent-encoded); observers and WHO see it. */
    public LockOptions value(String v) {
        Values.checked(v);
        LockOptions o = copy();
        o.value = v;
        return o;
    }

    /** Ask to be told ({@link Hold#onWanted}) when a conflicting request starts waiting, on any agent. */
    public LockOptions notifyWanted() {
        LockOptions o = copy();
        o.notifyWanted = true;
        return o;
    }

    /** Keep the name from everyone for d (0 to 5 minutes) after this hold ends uncleanly. */
    public LockOptions delay(Duration d) {
        LockOptions o = copy();
        o.delay = Args.within("delay", d, Duration.ZERO, Args.MAX_DELAY, "0 to 5 minutes");
        return o;
    }

    /** Keep the name held by nobody until d (0 to 24 hours) after the grant if released earlier. */
    public LockOptions minHold(Duration d) {
        LockOptions o = copy();
        o.minHold = Args.within("min_hold", d, Duration.ZERO, Args.MAX_MIN_HOLD, "0 to 24 hours");
        return o;
    }

    /** The options of a LOCK line after its names and owner. */
    String wire() {
        StringBuilder b = new StringBuilder();
        if (wait != null) {
            b.append(" wait=").append(Args.millis(wait));
        }
        if (ttl != null) {
            b.append(" ttl=").append(Args.millis(ttl));
        }
        if (shared) {
            b.append(" mode=shared");
        }
        if (limit > 0) {
            b.append(" limit=").append(limit);
        }
        if (fair) {
            b.append(" fair=true");
        }
        if (!value.isEmpty()) {
            b.append(" value=").append(Values.checked(value));
        }
        if (notifyWanted) {
            b.append(" notify=wanted");
        }
        if (delay != null) {
            b.append(" delay=").append(Args.millis(delay));
        }
        if (minHold != null) {
            b.append(" min_hold=").append(Args.millis(minHold));
        }
        return b.toString();
    }
}
