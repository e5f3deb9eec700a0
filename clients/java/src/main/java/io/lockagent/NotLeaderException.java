package io.lockagent;

/** {@link Election#proclaim} by an election that does not lead (etcd's ErrElectionNotLeader); code NOT_LEADER. */
public class NotLeaderException extends LockAgentException {
    NotLeaderException(String message) {
        super("NOT_LEADER", message);
    }

    NotLeaderException(String message, Throwable cause) {
        super("NOT_LEADER", message, cause);
    }
}
