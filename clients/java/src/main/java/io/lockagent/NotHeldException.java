package io.lockagent;

/** NOT_HELD: an unlock, extend or proclaim of a hold this owner does not hold (already released, or lost). */
public class NotHeldException extends LockAgentException {
    NotHeldException(String message) {
        super("NOT_HELD", message);
    }
}
