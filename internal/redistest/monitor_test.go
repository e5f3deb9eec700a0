package redistest

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseMonitor(t *testing.T) {
	c, ok := parseMonitor(`+1795548309.500986 [0 lua] "SET" "P{x}:released:a b" "\"1\"" "PX" "1000"`)
	if !ok || !c.Script || !c.At.Equal(time.Unix(1795548309, 500986000)) ||
		!slices.Equal(c.Args, []string{"SET", "P{x}:released:a b", `"1"`, "PX", "1000"}) {
		t.Fatalf("%v %+v", ok, c)
	}
	if _, ok := parseMonitor("+OK"); ok {
		t.Fatal("+OK read as a command")
	}
}

// TestMonitor: a command run through another connection is seen, with the
// server's time of it, between the times the test read before and after.
func TestMonitor(t *testing.T) {
	s := Start(t, 1)[0]
	var seen Command
	done := s.Monitor(func(c Command) bool {
		if len(c.Args) == 2 && strings.EqualFold(c.Args[0], "echo") {
			seen = c
			return false
		}
		return true
	})
	before := time.Now()
	if _, err := s.Do("ECHO", "hello"); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("ECHO never seen")
	}
	if seen.Args[1] != "hello" || seen.Script || seen.At.Before(before.Truncate(time.Microsecond)) || seen.At.After(after) {
		t.Fatalf("saw %+v, want ECHO hello between %v and %v", seen, before, after)
	}
}
