package lockagent

import (
	"strconv"
	"strings"
)

// maxValueLen is how long a value may be on the wire, encoded: the agent
// refuses a longer one.
const maxValueLen = 512

// valueChars are the bytes a value keeps as they are on the wire; every
// other byte, '%' included, is written as %XX.
const valueChars = "._:/@+=,-"

// encodeValue percent-encodes any text (any bytes) into what the protocol
// takes as a value: [A-Za-z0-9._:/@+=%,-].
func encodeValue(v string) string {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c != '%' && c < 0x80 && checkWord(string(c), 1, valueChars) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte("0123456789ABCDEF"[c>>4])
		b.WriteByte("0123456789ABCDEF"[c&15])
	}
	return b.String()
}

// decodeValue undoes encodeValue. A '%' not followed by two hex digits (a
// value another client wrote without encoding it) is kept as it is, so any
// value on the wire reads as some text.
func decodeValue(s string) string {
	if strings.IndexByte(s, '%') < 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			hi, lo := unhex(s[i+1]), unhex(s[i+2])
			if hi >= 0 && lo >= 0 {
				b.WriteByte(byte(hi<<4 | lo))
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unhex is the value of a hex digit, or -1.
func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// checkValue encodes a value and checks that it fits.
func checkValue(v string) (string, error) {
	enc := encodeValue(v)
	if len(enc) > maxValueLen {
		return "", &ArgError{Arg: "value", Value: clip(v), Want: "at most 512 bytes once percent-encoded (" +
			strconv.Itoa(len(enc)) + " here: each byte outside [A-Za-z0-9._:/@+=,-] takes three)"}
	}
	return enc, nil
}

// clip shortens a long argument for an error message.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
