package io.lockagent;

/** BAD_REQUEST: the agent found the request malformed (the client checks arguments first, so this means a newer rule of the agent). */
public class BadRequestException extends LockAgentException {
    BadRequestException(String message) {
        super("BAD_REQUEST", message);
    }
}
