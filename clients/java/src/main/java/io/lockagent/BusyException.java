package io.lockagent;

/** A lock's wait ran out before it was granted ({@code BUSY}); nothing is held. */
public class BusyException extends LockAgentException {
    BusyException(String name) {
        super("BUSY", "lockagent: busy: " + name + " was not granted within its wait");
    }
}
