package io.lockagent;

/** DENIED: the agent's ACL does not allow this name or verb to this process. */
public class DeniedException extends LockAgentException {
    DeniedException(String message) {
        super("DENIED", message);
    }
}
