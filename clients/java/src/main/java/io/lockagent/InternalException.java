package io.lockagent;

/** INTERNAL: a bug or unexpected state in the agent, or a reply the client cannot read. */
public class InternalException extends LockAgentException {
    InternalException(String message) {
        super("INTERNAL", message);
    }
}
