package io.lockagent;

/** {@link Election#leader()} found nobody leading (etcd's ErrElectionNoLeader); code NO_LEADER. */
public class NoLeaderException extends LockAgentException {
    NoLeaderException(String message) {
        super("NO_LEADER", message);
    }
}
