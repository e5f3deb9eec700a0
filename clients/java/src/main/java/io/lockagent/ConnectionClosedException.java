package io.lockagent;

/**
 * The connection to the agent is closed: by {@link LockAgentClient#close()}, or the agent went
 * away. The agent releases every hold of a closed connection.
 */
public class ConnectionClosedException extends LockAgentException {
    ConnectionClosedException(String message) {
        super("CLOSED", "lockagent: connection closed: " + message);
    }

    ConnectionClosedException(String code, String message, Throwable cause) {
        super(code, message, cause);
    }
}
