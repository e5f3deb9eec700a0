package io.lockagent;

import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * A lock on one name ({@link LockAgentClient#getLock}, {@code getFairLock}, and each side of
 * {@code getReadWriteLock}), owned by the calling thread: see {@link ThreadLock}.
 */
public final class AgentLock extends ThreadLock {
    private final String name;
    private final String unlockMode; // " mode=exclusive" for a write lock: undo its exclusive acquisition only
    private final String mode; // what isLocked looks for: "" any holder, "shared", "exclusive"

    /** kind: lock, fair, read or write; mode: what isLocked looks for ("" any holder, shared, exclusive). */
    AgentLock(LockAgentClient client, String name, String kind, LockOptions options, String unlockMode, String mode) {
        super(client, options, kind, List.of(name));
        this.name = name;
        this.unlockMode = unlockMode;
        this.mode = mode;
    }

    public String getName() {
        return name;
    }

    @Override
    Acquisition prepare(LockOptions opts) {
        return client.prepare(List.of(name), opts, unlockMode);
    }

    @Override
    void release(List<Hold> holds) {
        holds.get(0).unlock();
    }

    /** Whether anyone holds the name (in this lock's mode for a read or write lock), on any agent. */
    @Override
    public boolean isLocked() {
        return client.who(name).stream().anyMatch(h -> mode.isEmpty() || mode.equals(h.get("mode")));
    }

    /** The calling thread's hold: its fence, validity, loss; {@link IllegalMonitorStateException} if it holds none. */
    public Hold hold() {
        List<Hold> hs = currentHolds();
        if (hs.isEmpty()) {
            throw new IllegalMonitorStateException("lockagent: this thread does not hold " + this);
        }
        return hs.get(0);
    }

    /** The fence of the calling thread's hold: pass it to what the lock protects. */
    public long fence() {
        return hold().fence();
    }

    /** Completes if the calling thread's hold is lost (see {@link Hold#lost()}). */
    public CompletableFuture<LockLostException> lost() {
        return hold().lost();
    }

    @Override
    public String toString() {
        return "AgentLock[" + name + (mode.isEmpty() ? "" : " " + mode) + "]";
    }
}
