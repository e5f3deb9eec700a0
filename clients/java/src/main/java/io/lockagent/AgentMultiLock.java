package io.lockagent;

import java.util.List;

/**
 * A lock on several names at once ({@link LockAgentClient#getMultiLock}), all or none, owned by
 * the calling thread (see {@link ThreadLock}). The agent claims the names in byte order, so two
 * multi-locks over overlapping names never deadlock.
 */
public final class AgentMultiLock extends ThreadLock {
    private final List<String> names;

    AgentMultiLock(LockAgentClient client, List<String> names) {
        super(client, LockOptions.defaults(), "multi", names);
        this.names = names;
    }

    /** The names, as given. */
    public List<String> getNames() {
        return names.stream().map(Args::userName).toList();
    }

    @Override
    Acquisition prepare(LockOptions opts) {
        return client.prepare(names, opts, "");
    }

    /** Releases every name; if one was lost, releases the others and throws its loss. */
    @Override
    void release(List<Hold> holds) {
        LockAgentException first = null;
        for (Hold h : holds) {
            try {
                h.unlock();
            } catch (LockLostException e) {
                first = first == null ? e : first;
            }
        }
        if (first != null) {
            throw first;
        }
    }

    /** Whether anyone holds any of the names, on any agent. */
    @Override
    public boolean isLocked() {
        return names.stream().anyMatch(n -> !client.holders(n).isEmpty());
    }

    /** The calling thread's holds, one per name in the order given (fences: {@code holds().get(i).fence()}). */
    public List<Hold> holds() {
        List<Hold> hs = currentHolds();
        if (hs.isEmpty()) {
            throw new IllegalMonitorStateException("lockagent: this thread does not hold " + this);
        }
        return hs;
    }

    @Override
    public String toString() {
        return "AgentMultiLock" + getNames();
    }
}
