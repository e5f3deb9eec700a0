package io.lockagent;

/** SHUTTING_DOWN: the agent is stopping and accepts no new holds. */
public class ShuttingDownException extends LockAgentException {
    ShuttingDownException(String message) {
        super("SHUTTING_DOWN", message);
    }
}
