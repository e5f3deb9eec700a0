package io.lockagent;

/**
 * A hold ended without being released: the agent pushed {@code * LOST} (reason {@code quorum},
 * {@code expired}, {@code revoked}, {@code shutdown}) or the connection dropped (reason
 * {@code disconnected}). {@link Hold#lost()} completes with it; unlocking a lost hold throws it.
 */
public class LockLostException extends LockAgentException {
    private final String name;
    private final String owner;
    private final long fence;
    private final String reason;
    private final String why;

    LockLostException(String name, String owner, long fence, String reason, String why) {
        super("LOST", "lockagent: lock " + name + " lost: " + reason + (why.isEmpty() ? "" : " (" + why + ")"));
        this.name = name;
        this.owner = owner;
        this.fence = fence;
        this.reason = reason;
        this.why = why;
    }

    /** A copy to throw from the caller's thread, so its stack trace shows where the loss was noticed. */
    LockLostException rethrown() {
        LockLostException e = new LockLostException(name, owner, fence, reason, why);
        e.initCause(this);
        return e;
    }

    public String name() { return name; }

    public String owner() { return owner; }

    /** The fence of the lost hold: what no longer protects anything. */
    public long fence() { return fence; }

    /** quorum, expired, revoked, shutdown, or disconnected. */
    public String reason() { return reason; }

    /** For a hold revoked with a reason word, that word; "" otherwise. */
    public String why() { return why; }
}
