package io.lockagent;

/**
 * Every error of the client but a refused argument ({@link InvalidArgumentException}): an
 * {@code ERR} reply of the agent (one subclass per wire code, {@link #code()} the code), a
 * {@link BusyException}, a {@link LockLostException}, a {@link ConnectionClosedException}.
 */
public class LockAgentException extends RuntimeException {
    private final String code;

    LockAgentException(String code, String message) {
        super(message);
        this.code = code;
    }

    LockAgentException(String code, String message, Throwable cause) {
        super(message, cause);
        this.code = code;
    }

    /** The wire code (NO_QUORUM, NOT_HELD, ...), or the client's own: BUSY, LOST, CLOSED, CONNECT. */
    public String code() {
        return code;
    }

    /** The exception of an {@code ERR CODE text} reply; an unknown code is INTERNAL. */
    static LockAgentException fromReply(String code, String text) {
        String message = "lockagent: " + code + ": " + text;
        switch (code) {
            case "BAD_REQUEST": return new BadRequestException(message);
            case "UNKNOWN_VERB": return new UnknownVerbException(message);
            case "BAD_NAME": return new BadNameException(message);
            case "NOT_HELD": return new NotHeldException(message);
            case "NO_QUORUM": return new NoQuorumException(message);
            case "CONFLICT": return new ConflictException(message);
            case "SETTINGS": return new SettingsException(message);
            case "DENIED": return new DeniedException(message);
            case "LIMIT": return new LimitException(message);
            case "CANCELLED": return new CancelledException(message);
            case "SHUTTING_DOWN": return new ShuttingDownException(message);
            case "INTERNAL": return new InternalException(message);
            default: return new InternalException("lockagent: INTERNAL: unknown code " + code + ": " + text);
        }
    }
}
