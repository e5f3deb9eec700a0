package io.lockagent;

import java.util.concurrent.locks.ReadWriteLock;

/**
 * A read/write lock on one name: many readers (on any agents) or one writer, each side owned by
 * the calling thread. The writer may take the read lock too, and keep it after unlocking the
 * write lock (a downgrade: readers elsewhere may then be granted). A reader taking the write lock
 * gets {@link ConflictException} at once: there is no upgrade (Redisson deadlocks there).
 * A writer waiting for readers is not starved: later readers queue behind it.
 */
public final class AgentReadWriteLock implements ReadWriteLock {
    private final AgentLock read;
    private final AgentLock write;

    AgentReadWriteLock(LockAgentClient client, String name) {
        // Each side counts its own re-entries, so the agent holds at most one exclusive and one
        // shared acquisition per thread, the shared one on top: a plain UNLOCK undoes the shared
        // one, UNLOCK mode=exclusive the exclusive one, whatever order the thread unlocks in.
        this.read = new AgentLock(client, name, "read", LockOptions.defaults().shared(), "", "shared");
        this.write = new AgentLock(client, name, "write", LockOptions.defaults(), " mode=exclusive", "exclusive");
    }

    @Override
    public AgentLock readLock() {
        return read;
    }

    @Override
    public AgentLock writeLock() {
        return write;
    }
}
