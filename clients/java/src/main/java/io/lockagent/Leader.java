package io.lockagent;

import java.util.List;
import java.util.Map;

/**
 * Who leads a name, as an observer sees it: the holder elected by {@link LockAgentClient#campaign},
 * its term (fence, strictly increasing per name), its value (decoded) and its agent's id.
 * {@code none} is true while nobody leads; the other fields are then zero or empty.
 */
public record Leader(String name, boolean none, long fence, String value, String agent) {
    /** Reads a {@code * LEADER NAME ...} push's words after the name. */
    static Leader of(String name, List<String> words, Map<String, String> f) {
        if (!words.isEmpty() && words.get(0).equals("none")) {
            return new Leader(name, true, 0, "", "");
        }
        long fence;
        try {
            fence = Long.parseLong(f.getOrDefault("fence", "0"));
        } catch (NumberFormatException e) {
            fence = 0;
        }
        return new Leader(name, false, fence, Values.decode(f.getOrDefault("value", "")), f.getOrDefault("agent", ""));
    }
}
