package io.lockagent;

/** Values cross the wire percent-encoded, as the Go and Python clients write them. */
public class ValuesTest {
    @Test
    public void anyTextSurvivesTheRoundTrip() {
        String[] texts = {"", "plain", "host:8080", "a b", "100%", "{\"json\": [1, 2]}", "ünïcödé ✓", "%zz", "%4"};
        for (String t : texts) {
            String enc = Values.encode(t);
            Check.that(enc.matches("[A-Za-z0-9._:/@+=%,-]*"), "encoded " + t + " as " + enc);
            Check.equal(t, Values.decode(enc), "round trip of " + enc);
        }
        Check.equal("a%20b%25", Values.encode("a b%"), "encoding");
        Check.equal("%zz", Values.decode("%zz"), "a % without hex digits stays");
    }
}
