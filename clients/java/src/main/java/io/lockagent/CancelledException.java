package io.lockagent;

/** CANCELLED: a waiting lock was cancelled. */
public class CancelledException extends LockAgentException {
    CancelledException(String message) {
        super("CANCELLED", message);
    }
}
