package lockagent

import (
	"strconv"
	"strings"
	"time"
)

// What protocol v1 accepts (see docs/protocol.md). The client checks every
// word it puts on the wire against these before writing anything, so a name
// or option value can never be read by the agent as another word or request.
const (
	maxNameLen   = 200
	maxOwnerLen  = 64
	maxClientLen = 64
	maxTagLen    = 32
	maxLine      = 4096 // a request line, tag included, without its LF
	maxLimit     = 4096
	// maxDuration is the agent's bound on any duration: one year.
	maxDuration = 365 * 24 * time.Hour
	nameChars   = "[A-Za-z0-9._:/@+-]"
	ownerChars  = "[A-Za-z0-9._:-]"
)

// checkWord reports whether s is 1 to max bytes, each alphanumeric ASCII or
// one of extra.
func checkWord(s string, max int, extra string) bool {
	if len(s) == 0 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && strings.IndexByte(extra, c) < 0 {
			return false
		}
	}
	return true
}

func checkName(name string) error {
	if !checkWord(name, maxNameLen, "._:/@+-") {
		return &ArgError{Arg: "name", Value: name, Want: "1-200 bytes of " + nameChars}
	}
	return nil
}

// maxNamesLen is how many bytes the names of one LOCK may take, with a space
// between each: what a request line leaves once the longest tag and the
// longest options are counted. A longer line would not be refused as a bad
// request: the agent closes the connection, and every hold of it with it.
var maxNamesLen = maxLine - (maxTagLen + 1) - len("LOCK ") - len(" owner="+strings.Repeat("o", maxOwnerLen)+
	" wait="+durationArg(maxDuration)+" ttl="+durationArg(maxDuration)+
	" mode=shared limit="+strconv.Itoa(maxLimit)+" fair=true")

// checkNames checks the names of a multi-lock: at least one, each a name,
// none twice (the agent refuses that), and all in one request line.
func checkNames(names []string) error {
	if len(names) == 0 {
		return &ArgError{Arg: "names", Value: "", Want: "at least one name"}
	}
	seen := make(map[string]bool, len(names))
	total := -1
	for _, n := range names {
		if err := checkName(n); err != nil {
			return err
		}
		if seen[n] {
			return &ArgError{Arg: "names", Value: n, Want: "each name once"}
		}
		seen[n] = true
		total += 1 + len(n)
	}
	if total > maxNamesLen {
		return &ArgError{Arg: "names", Value: strconv.Itoa(len(names)) + " names of " + strconv.Itoa(total) + " bytes",
			Want: "at most " + strconv.Itoa(maxNamesLen) + " bytes, spaces included, to fit one request line"}
	}
	return nil
}

func checkOwner(owner string) error {
	if !checkWord(owner, maxOwnerLen, "._:-") {
		return &ArgError{Arg: "owner", Value: owner, Want: "1-64 bytes of " + ownerChars}
	}
	return nil
}

// checkClientName checks the name HELLO gives the agent for its logs. The
// agent takes any word; the client keeps to the lock-name characters.
func checkClientName(name string) error {
	if !checkWord(name, maxClientLen, "._:/@+-") {
		return &ArgError{Arg: "client name", Value: name, Want: "1-64 bytes of " + nameChars}
	}
	return nil
}

func checkTag(tag string) error {
	if !checkWord(tag, maxTagLen, "._-") {
		return &ArgError{Arg: "tag", Value: tag, Want: "1-32 bytes of [A-Za-z0-9._-]"}
	}
	return nil
}

// checkDuration checks a wait (min 0) or a ttl (min 1ms).
func checkDuration(arg string, d, min time.Duration) error {
	if d < min || d > maxDuration {
		want := "0 to 1 year (0 tries once; leave Wait out to wait forever)"
		if min > 0 {
			want = "1ms to 1 year"
		}
		return &ArgError{Arg: arg, Value: d.String(), Want: want}
	}
	return nil
}

func checkLimit(n int) error {
	if n < 1 || n > maxLimit {
		return &ArgError{Arg: "limit", Value: strconv.Itoa(n), Want: "1 to " + strconv.Itoa(maxLimit)}
	}
	return nil
}

// durationArg formats d for the wire as whole milliseconds, rounded up so a
// positive duration never becomes 0.
func durationArg(d time.Duration) string {
	ms := d / time.Millisecond
	if d%time.Millisecond != 0 {
		ms++
	}
	return strconv.FormatInt(int64(ms), 10)
}
