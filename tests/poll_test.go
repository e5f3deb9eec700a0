package tests

import (
	"time"

	"github.com/lock-agent/lock-agent/internal/redistest"
)

// pollFor calls cond every interval until it returns true or within has
// passed, and says whether it did. It is for what sends the test no event
// and may rightly never come: a grant another agent may or may not make
// (the hostile tests try for a while, and none coming is an outcome), a
// name free to a fresh process, a moment a fault loop waits for. Where
// never coming is a failure, use lockagenttest.Eventually, which fails the
// test; where an event can be waited on, wait on it.
func pollFor(within, interval time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(within); ; time.Sleep(interval) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// keysGone says whether no master has a holder key of name left.
func keysGone(servers []*redistest.Server, name string) bool {
	for _, s := range servers {
		if s.Keys("lock-agent:{"+name+"}:h:*") > 0 {
			return false
		}
	}
	return true
}
