// Package protocol is lock-agent's wire format, version 1: it parses request
// lines into typed requests, formats reply lines, and maps errors to the wire's
// error codes. It knows nothing of locks or Redis; see docs/protocol.md.
package protocol

import (
	"strconv"
	"strings"
	"time"
)

const (
	// Version is the protocol version this package speaks.
	Version = 1
	// MaxLine is the longest request line, in bytes, without its LF.
	MaxLine = 4096
	// MaxNameLen is the longest lock name in bytes.
	MaxNameLen = 200
	// NoTag is the tag of a reply to a line whose first word is not a valid tag.
	NoTag = "-"
	// Forever is the wait that never ends.
	Forever time.Duration = -1
)

// Request is one parsed request line: a tag, an upper-cased verb, positional
// words and key=value options in the order given.
type Request struct {
	Tag  string
	Verb string
	Args []string
	Opts []Option
}

// Option is one key=value word.
type Option struct {
	Key, Value string
}

// Parse splits one request line (without its LF; a trailing CR is dropped) into
// a Request. An empty line returns (nil, nil). On error the returned Request
// still carries the tag to answer with (NoTag when the tag itself was bad).
func Parse(line string) (*Request, error) {
	line = strings.TrimSuffix(line, "\r")
	if len(line) > MaxLine {
		return &Request{Tag: NoTag}, Errorf(ErrBadRequest, "line too long")
	}
	words := strings.Fields(line)
	if len(words) == 0 {
		return nil, nil
	}
	r := &Request{Tag: NoTag}
	if !validTag(words[0]) {
		return r, Errorf(ErrBadRequest, "bad tag %q: want 1-32 of [A-Za-z0-9._-]", clip(words[0]))
	}
	r.Tag = words[0]
	if len(words) < 2 {
		return r, Errorf(ErrBadRequest, "missing verb")
	}
	r.Verb = strings.ToUpper(words[1])
	for _, w := range words[2:] {
		k, v, ok := strings.Cut(w, "=")
		if !ok {
			r.Args = append(r.Args, w)
			continue
		}
		if k == "" {
			return r, Errorf(ErrBadRequest, "option with no name: %q", clip(w))
		}
		for _, o := range r.Opts {
			if o.Key == k {
				return r, Errorf(ErrBadRequest, "option %s given twice", clip(k))
			}
		}
		r.Opts = append(r.Opts, Option{Key: k, Value: v})
	}
	return r, nil
}

// clip shortens peer-provided text quoted in an error so a reply stays small.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

func validTag(s string) bool {
	if len(s) == 0 || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(isAlnum(c) || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// ValidName reports whether s is a lock name: 1-200 bytes of [A-Za-z0-9._:/@+-].
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > MaxNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(isAlnum(c) || strings.IndexByte("._:/@+-", c) >= 0) {
			return false
		}
	}
	return true
}

// ValidOwner reports whether s is an owner: 0-64 chars of [A-Za-z0-9._:-].
func ValidOwner(s string) bool {
	if len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(isAlnum(c) || c == '.' || c == '_' || c == ':' || c == '-') {
			return false
		}
	}
	return true
}

// ValidValue reports whether s may be a hold's value: 0-512 bytes of
// [A-Za-z0-9._:/@+=%,-] (clients percent-encode anything else).
func ValidValue(s string) bool {
	if len(s) > MaxValueLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(isAlnum(c) || strings.IndexByte("._:/@+=%,-", c) >= 0) {
			return false
		}
	}
	return true
}

// ValidAgentID reports whether s may be an agent id (agent.id): 1-255
// printable bytes, no space and no "=".
func ValidAgentID(s string) bool {
	if len(s) == 0 || len(s) > 255 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || c == '=' {
			return false
		}
	}
	return true
}

// validWord reports whether s is a reason word: 1-32 of [a-z0-9_].
func validWord(s string) bool {
	if len(s) == 0 || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// ParseDuration reads a duration as an integer of milliseconds ("1500") or a
// Go duration ("1.5s"). Negative durations are an error; so is "forever"
// unless allowForever, when it returns Forever.
func ParseDuration(s string, allowForever bool) (time.Duration, error) {
	if s == "forever" {
		if allowForever {
			return Forever, nil
		}
		return 0, Errorf(ErrBadRequest, "forever is not a duration here")
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		if ms < 0 || ms > int64(maxDuration/time.Millisecond) {
			return 0, Errorf(ErrBadRequest, "bad duration %q", clip(s))
		}
		return time.Duration(ms) * time.Millisecond, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, Errorf(ErrBadRequest, "bad duration %q: want milliseconds or a Go duration", clip(s))
	}
	return d, nil
}

// maxDuration bounds durations to a year, so deadlines never overflow.
const maxDuration = 365 * 24 * time.Hour
