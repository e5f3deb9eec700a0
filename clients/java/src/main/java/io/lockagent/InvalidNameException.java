package io.lockagent;

/**
 * A lock name outside 1-200 bytes of {@code [A-Za-z0-9._:/@+-{}]} (each brace and each '+' of a
 * name with braces counting 3), or a name without braces that holds "+7B" or "+7D" (how braces go
 * on the wire), refused before anything was sent.
 */
public class InvalidNameException extends InvalidArgumentException {
    InvalidNameException(String value) {
        super("name", value, "1-200 bytes of [A-Za-z0-9._:/@+-{}] (in a name with braces, each brace and '+' takes 3;"
                + " without braces, no \"+7B\" or \"+7D\")");
    }
}
