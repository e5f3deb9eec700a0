package io.lockagent;

/** NO_QUORUM: fewer than a majority of masters could be reached or agreed in time; nothing is held. */
public class NoQuorumException extends LockAgentException {
    NoQuorumException(String message) {
        super("NO_QUORUM", message);
    }
}
