package io.lockagent;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;

/**
 * A value attached to a hold is any text; on the wire it is [A-Za-z0-9._:/@+=%,-]. Every other
 * byte of its UTF-8, '%' included, is written as %XX, as the Go and Python clients do.
 */
final class Values {
    private static final String KEPT = "._:/@+=,-";
    private static final char[] HEX = "0123456789ABCDEF".toCharArray();

    private Values() {}

    static String encode(String v) {
        StringBuilder b = new StringBuilder();
        for (byte x : v.getBytes(StandardCharsets.UTF_8)) {
            int c = x & 0xff;
            if (c < 0x80 && c != '%' && Args.isWord(String.valueOf((char) c), 1, KEPT)) {
                b.append((char) c);
            } else {
                b.append('%').append(HEX[c >> 4]).append(HEX[c & 15]);
            }
        }
        return b.toString();
    }

    /** Undoes encode; a '%' not followed by two hex digits (written by a client that did not encode) stays. */
    static String decode(String s) {
        if (s.indexOf('%') < 0) {
            return s;
        }
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        byte[] in = s.getBytes(StandardCharsets.UTF_8);
        for (int i = 0; i < in.length; i++) {
            if (in[i] == '%' && i + 2 < in.length) {
                int hi = Character.digit(in[i + 1], 16);
                int lo = Character.digit(in[i + 2], 16);
                if (hi >= 0 && lo >= 0) {
                    out.write(hi << 4 | lo);
                    i += 2;
                    continue;
                }
            }
            out.write(in[i]);
        }
        return out.toString(StandardCharsets.UTF_8);
    }

    /** Encodes v and checks it fits. */
    static String checked(String v) {
        if (v == null) {
            throw new InvalidArgumentException("value", "null", "any text, at most 512 bytes once percent-encoded");
        }
        String enc = encode(v);
        if (enc.length() > Args.MAX_VALUE) {
            throw new InvalidArgumentException("value", Args.clip(v), "at most 512 bytes once percent-encoded ("
                    + enc.length() + " here: each byte outside [A-Za-z0-9._:/@+=,-] takes three)");
        }
        return enc;
    }
}
