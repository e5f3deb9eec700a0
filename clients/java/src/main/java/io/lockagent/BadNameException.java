package io.lockagent;

/** BAD_NAME: the agent refused a lock name. */
public class BadNameException extends LockAgentException {
    BadNameException(String message) {
        super("BAD_NAME", message);
    }
}
