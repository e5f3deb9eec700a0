package io.lockagent;

/** Nothing answered at the agent's socket; the message says how to start an agent or find it. */
public class ConnectException extends ConnectionClosedException {
    ConnectException(String message, Throwable cause) {
        super("CONNECT", message, cause);
    }
}
