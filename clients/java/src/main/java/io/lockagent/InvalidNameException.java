package io.lockagent;

/** A lock name outside 1-200 bytes of {@code [A-Za-z0-9._:/@+-]}, refused before anything was sent. */
public class InvalidNameException extends InvalidArgumentException {
    InvalidNameException(String value) {
        super("name", value, "1-200 bytes of [A-Za-z0-9._:/@+-]");
    }
}
