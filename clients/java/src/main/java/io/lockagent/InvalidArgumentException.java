package io.lockagent;

/**
 * An argument the client refused before writing anything to the agent: a name, owner or option
 * value outside what protocol v1 accepts. {@link #argument()} names it.
 */
public class InvalidArgumentException extends IllegalArgumentException {
    private final String argument;
    private final String value;

    InvalidArgumentException(String argument, String value, String want) {
        super("lockagent: invalid " + argument + " \"" + value + "\": want " + want);
        this.argument = argument;
        this.value = value;
    }

    /** name, names, owner, wait, ttl, lease, limit, permits, value, delay, min_hold, fence, client name, request. */
    public String argument() { return argument; }

    public String value() { return value; }
}
