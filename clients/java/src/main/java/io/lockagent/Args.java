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

    static String name(String name) {
        if (!isWord(name, MAX_NAME, NAME_EXTRA)) {
            throw new InvalidNameException(String.valueOf(name));
        }
        return name;
    }

    /** The names of a multi-lock: at least one, each a name, none twice (the agent refuses that). */
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
        return List.copyOf(names);
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
