package io.lockagent;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/** A final reply line (OK, BUSY, ERR) with the DATA lines that came before it. */
final class Reply {
    final String kind;
    final List<String> words; // the final line's words after the tag
    final Map<String, String> fields; // its key=value words
    final List<Map<String, String>> data;

    Reply(List<String> words, List<Map<String, String>> data) {
        this.kind = words.get(0);
        this.words = words;
        this.fields = fields(words.subList(1, words.size()));
        this.data = data;
    }

    /** The key=value words of a line; a word without '=' is left out. */
    static Map<String, String> fields(List<String> words) {
        Map<String, String> f = new HashMap<>();
        for (String w : words) {
            int eq = w.indexOf('=');
            if (eq > 0) {
                f.put(w.substring(0, eq), w.substring(eq + 1));
            }
        }
        return f;
    }

    /** Splits a line at runs of spaces. */
    static List<String> words(String line) {
        List<String> out = new ArrayList<>();
        for (String w : line.split(" +")) {
            if (!w.isEmpty()) {
                out.add(w);
            }
        }
        return out;
    }

    long longField(String key) {
        try {
            return Long.parseLong(fields.getOrDefault(key, "0"));
        } catch (NumberFormatException e) {
            return 0;
        }
    }

    /** Throws what an ERR or BUSY reply means; returns this for OK. */
    Reply orThrow(String name) {
        switch (kind) {
            case "OK":
                return this;
            case "BUSY":
                throw new BusyException(name);
            case "ERR":
                String code = words.size() > 1 ? words.get(1) : "INTERNAL";
                String text = words.size() > 2 ? String.join(" ", words.subList(2, words.size())) : "";
                throw LockAgentException.fromReply(code, text);
            default:
                throw new InternalException("lockagent: INTERNAL: unexpected reply " + kind);
        }
    }
}
