package lockagent

import (
	"strings"
	"testing"
	"unicode/utf8"
)

var valueSeeds = []string{
	"", "plain", "host-1:8080", "https://svc.example/a?b=c&d=e#f", `{"addr": "10.0.0.1", "tags": ["a b"]}`,
	"50%", "%", "%2", "%zz", "%41", "a b\tc\nd\r\n", "héllo wörld ✓ 日本語 🦀", "\x00\x01\xff\xfe", "=,+@/:._-",
	strings.Repeat("~", 10), "* LEADER x none", "1 LOCK other",
}

// TestValueRoundTrip: whatever text a value is, it goes on the wire as one
// word of the value characters, and reads back as it was.
func TestValueRoundTrip(t *testing.T) {
	for _, v := range valueSeeds {
		checkRoundTrip(t, v)
	}
}

func FuzzValueRoundTrip(f *testing.F) {
	for _, v := range valueSeeds {
		f.Add(v)
	}
	f.Fuzz(checkRoundTrip)
}

func checkRoundTrip(t *testing.T, v string) {
	enc := encodeValue(v)
	for i := 0; i < len(enc); i++ {
		if c := enc[i]; c != '%' && !checkWord(string(c), 1, valueChars) {
			t.Fatalf("encodeValue(%q) = %q: byte %q is not a value character", v, enc, c)
		}
	}
	if got := decodeValue(enc); got != v {
		t.Fatalf("decodeValue(encodeValue(%q)) = %q", v, got)
	}
	if utf8.ValidString(v) && len(enc) > 3*len(v) {
		t.Fatalf("encodeValue(%q) is %d bytes, more than 3 per byte", v, len(enc))
	}
}

// TestDecodeValueKeepsWhatIsNotAnEscape: a value another client wrote
// without encoding it reads as what it says, not as an error.
func TestDecodeValueKeepsWhatIsNotAnEscape(t *testing.T) {
	for _, tc := range []struct{ wire, want string }{
		{"50%", "50%"},
		{"%", "%"},
		{"%4", "%4"},
		{"%zz1", "%zz1"},
		{"a%2Cb%2cc", "a,b,c"},
		{"%25", "%"},
	} {
		if got := decodeValue(tc.wire); got != tc.want {
			t.Errorf("decodeValue(%q) = %q, want %q", tc.wire, got, tc.want)
		}
	}
}
