package io.lockagent;

/** CONFLICT: the request contradicts a hold (shared then exclusive: no upgrade; another semaphore limit). */
public class ConflictException extends LockAgentException {
    ConflictException(String message) {
        super("CONFLICT", message);
    }
}
