package io.lockagent;

/** UNKNOWN_VERB: the agent does not know the verb (an older agent). */
public class UnknownVerbException extends LockAgentException {
    UnknownVerbException(String message) {
        super("UNKNOWN_VERB", message);
    }
}
