package io.lockagent;

/** LIMIT: a resource limit of the agent was reached (sessions, holds, waiters); nothing is held. */
public class LimitException extends LockAgentException {
    LimitException(String message) {
        super("LIMIT", message);
    }
}
