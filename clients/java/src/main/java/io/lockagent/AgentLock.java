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
    private final String mode; // what toString shows: "", "shared", "exclusive"

    /** kind: lock, fair, read or write; mode: the side of a read/write lock ("" for a lock). */
    AgentLock(LockAgentClient client, String name, String kind, LockOptions options, String unlockMode, String mode) {
        super(client, options, kind, List.of(name));
        this.name = name;
        this.unlockMode = unlockMode;
        this.mode = mode;
    }

    /** The name, as given (a hash-tag name with its braces). */
    public String getName() {
        return Args.userName(name);
    }

    @Override
    Acquisition prepare(LockOptions opts) {
        return client.prepare(List.of(name), opts, unlockMode);
    }

    @Override
    void release(List<Hold> holds) {
        holds.get(0).unlock();
    }

    /**
     * Whether anyone holds the name, in any mode, on any agent: for a read or write lock, whether
     * either side is held by anyone.
     */
    @Override
    public boolean isLocked() {
        return !client.holders(name).isEmpty();
    }

    /**
     * Ends every hold of the name, wherever it is (REVOKE; both sides of a read/write lock), as
     * Redisson's: true if there was one. Each holder's hold is lost with reason "revoked". The
     * agent refuses it ({@link DeniedException}) without an ACL rule granting "revoke" (or, without
     * an acl block, to any user but root).
     */
    public boolean forceUnlock() {
        return client.revokeWire(name) > 0;
    }

    /**
     * Milliseconds the hold of the name lasts yet, as Redisson's: for a hold of this client (the
     * calling thread's, else another thread's), the time to its lease's end (lock(leaseTime)) or,
     * for a hold the agent keeps renewing, its current validity (renewals counted, as the agent
     * reports it); -2 if nobody holds the name; -1 if only holders elsewhere do (their time is not
     * known here).
     */
    public long remainTimeToLive() {
        List<Hold> mine = currentHolds();
        Hold h = !mine.isEmpty() && mine.get(0).isHeld() ? mine.get(0) : client.heldOn(name);
        if (h != null) {
            return h.remainMillis();
        }
        return client.holders(name).isEmpty() ? -2 : -1;
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
        return "AgentLock[" + getName() + (mode.isEmpty() ? "" : " " + mode) + "]";
    }
}
