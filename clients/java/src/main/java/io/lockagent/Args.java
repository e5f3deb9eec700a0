package io.lockagent;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * What protocol v1 accepts, checked before anything is written, so a name or option value can
 * never be read by the agent as another word or request. The bounds are the agent's (and the Go
 * and Python clients').
 */
final class Args {
    static final int MAX_NAME = 200;
    static final int MAX_OWNER = 64;
    static final int MAX_TAG = 32;
    static final int MAX_LINE = 4096; // a request line, tag included, without its LF
    static final int MAX_LIMIT = 4096;
    static final int MAX_VALUE = 512; // encoded
    static final Duration MAX_WAIT = Duration.ofDays(365);
    static final Duration MAX_TTL = Duration.ofDays(30); // protocol.MaxTTL
    static final Duration MIN_TTL = Duration.ofMillis(50); // the agent's least ttl (docs/protocol.md: ttl=)
    static final String TTL_BOUNDS = "50ms to 30 days";
    static final Duration MAX_DELAY = Duration.ofMinutes(5);
    static final Duration MAX_MIN_HOLD = Duration.ofHours(24);
    static final String NAME_EXTRA = "._:/@+-";
    static final String OWNER_EXTRA = "._:-";

    private Args() {}

    /** Whether s is 1 to max bytes, each alphanumeric ASCII or one of extra. */
    static boolean isWord(String s, int max, String extra) {
        if (s == null || s.isEmpty() || s.length() > max) {
            return false;
        }
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            boolean alnum = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9';
            if (!alnum && extra.indexOf(c) < 0) {
                return false;
            }
        }
        return true;
    }

    /**
     * The name as the agent is sent it. The agent takes [A-Za-z0-9._:/@+-]; a name with Redis hash
     * tags ({@code {test}:abc:key}, as Redisson's users write them) is sent with each '{' as "+7B",
     * each '}' as "+7D" and each '+' as "+2B" (percent-encoding, '+' for '%'), and read back by
     * {@link #userName}. So that no two names meet on the wire, a name without braces may not
     * hold "+7B" or "+7D".
     */
    static String name(String name) {
        if (name != null && (name.indexOf('{') >= 0 || name.indexOf('}') >= 0)) {
            StringBuilder b = new StringBuilder();
            for (int i = 0; i < name.length(); i++) {
                char c = name.charAt(i);
                b.append(c == '{' ? "+7B" : c == '}' ? "+7D" : c == '+' ? "+2B" : String.valueOf(c));
            }
            String wire = b.toString();
            if (!isWord(wire, MAX_NAME, NAME_EXTRA)) {
                throw new InvalidNameException(name);
            }
            return wire;
        }
        if (!isWord(name, MAX_NAME, NAME_EXTRA) || encodesBraces(name)) {
            throw new InvalidNameException(String.valueOf(name));
        }
        return name;
    }

    private static boolean encodesBraces(String wire) {
        return wire.contains("+7B") || wire.contains("+7D");
    }

    /** A name as the agent has it, as the user gave it (see {@link #name}). */
    static String userName(String wire) {
        if (wire == null || !encodesBraces(wire)) {
            return wire;
        }
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < wire.length(); i++) {
            String esc = wire.startsWith("+", i) && i + 3 <= wire.length() ? wire.substring(i, i + 3) : "";
            switch (esc) {
                case "+7B" -> { b.append('{'); i += 2; }
                case "+7D" -> { b.append('}'); i += 2; }
                case "+2B" -> { b.append('+'); i += 2; }
                default -> b.append(wire.charAt(i));
            }
        }
        return b.toString();
    }

    /** The names of a multi-lock, as on the wire: at least one, each a name, none twice (the agent refuses that). */
    static List<String> names(List<String> names) {
        if (names == null || names.isEmpty()) {
            throw new InvalidArgumentException("names", "", "at least one name");
        }
        Set<String> seen = new HashSet<>();
        for (String n : names) {
            if (!seen.add(name(n))) {
                throw new InvalidArgumentException("names", n, "each name once");
            }
        }
        return names.stream().map(Args::name).toList();
    }

    static String owner(String owner) {
        if (!isWord(owner, MAX_OWNER, OWNER_EXTRA)) {
            throw new InvalidArgumentException("owner", String.valueOf(owner), "1-64 bytes of [A-Za-z0-9._:-]");
        }
        return owner;
    }

    static Duration within(String arg, Duration d, Duration least, Duration most, String want) {
        if (d == null || d.compareTo(least) < 0 || d.compareTo(most) > 0) {
            throw new InvalidArgumentException(arg, String.valueOf(d), want);
        }
        return d;
    }

    static int limit(String arg, int n) {
        if (n < 1 || n > MAX_LIMIT) {
            throw new InvalidArgumentException(arg, Integer.toString(n), "1 to " + MAX_LIMIT);
        }
        return n;
    }

    static long fence(long fence) {
        if (fence <= 0) {
            throw new InvalidArgumentException("fence", Long.toString(fence), "a positive fence");
        }
        return fence;
    }

    /** A request the agent would not read as one line would close the connection, and every hold with it. */
    static String line(String line) {
        int most = MAX_LINE - MAX_TAG - 1;
        int len = line.getBytes(StandardCharsets.UTF_8).length;
        if (len > most) {
            throw new InvalidArgumentException("request", clip(line), "at most " + most + " bytes in one line (" + len
                    + " here): fewer or shorter names, or a shorter value");
        }
        return line;
    }

    /** A duration on the wire: whole milliseconds, rounded up so a positive duration never becomes 0. */
    static String millis(Duration d) {
        long ms = d.toMillis();
        if (d.minusMillis(ms).compareTo(Duration.ZERO) > 0) {
            ms++;
        }
        return Long.toString(ms);
    }

    static String clip(String s) {
        return s.length() > 40 ? s.substring(0, 40) + "..." : s;
    }
}
