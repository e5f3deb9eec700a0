package agent_test

import (
	"strings"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/quorum/rules"

	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/quorum/clock"
)

// TestTTLHoldsEndOnTheAgentsClock: a ttl= hold is pushed LOST
// reason=expired exactly at its end on the agent's clock, not a moment
// before; EXTEND moves that end (later, earlier, or gives a watchdog hold
// one) and answers the validity to it; the names of a multi-lock end
// together; and an ended name is given back, so another client gets it.
// The lease is an hour (see startOnFakeClock), so every end here comes
// before a renewal is due.
func TestTTLHoldsEndOnTheAgentsClock(t *testing.T) {
	leaseValidity := rules.Validity(time.Hour, 0, 0.01).Milliseconds()
	for _, tc := range []struct {
		name     string
		lock     string
		validity int64         // the LOCK's OK
		extendAt time.Duration // if > 0, extend is sent then, and answers extended
		extend   string
		extended int64
		end      time.Duration // from the LOCK
	}{
		{name: "a ttl= hold ends at its ttl", lock: "LOCK t ttl=10m", validity: 600000, end: 10 * time.Minute},
		{name: "EXTEND moves the end later", lock: "LOCK t ttl=10m", validity: 600000,
			extendAt: 5 * time.Minute, extend: "EXTEND t ttl=10m", extended: 600000, end: 15 * time.Minute},
		{name: "EXTEND moves the end earlier", lock: "LOCK t ttl=10m", validity: 600000,
			extendAt: time.Minute, extend: "EXTEND t ttl=1m", extended: 60000, end: 2 * time.Minute},
		{name: "EXTEND gives a watchdog hold an end", lock: "LOCK t", validity: leaseValidity,
			extendAt: time.Minute, extend: "EXTEND t ttl=1m", extended: 60000, end: 2 * time.Minute},
		{name: "the names of a multi-lock with ttl= end together", lock: "LOCK t u ttl=10m", validity: 600000, end: 10 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, clock := startOnFakeClock(t, nil)
			c := agenttest.Dial(t, a.Config.Socket.Path)
			if r := c.Do(tc.lock); r.Kind != "OK" || r.Int("validity") != tc.validity {
				t.Fatalf("%s: %s, want validity=%d", tc.lock, r.Line, tc.validity)
			}
			if tc.extendAt > 0 {
				advance(clock, tc.extendAt)
				if r := c.Do(tc.extend); r.Kind != "OK" || r.Int("validity") != tc.extended {
					t.Fatalf("%s: %s, want validity=%d", tc.extend, r.Line, tc.extended)
				}
			}
			advance(clock, tc.end-tc.extendAt-time.Millisecond)
			c.Do("PING")
			if p := c.Push(50 * time.Millisecond); p != "" {
				t.Fatalf("pushed %q a millisecond before the end", p)
			}
			advance(clock, time.Millisecond)
			names := strings.Fields(tc.lock)[1:]
			if strings.Contains(names[len(names)-1], "=") {
				names = names[:len(names)-1]
			}
			for range names {
				if p := c.Push(5 * time.Second); !strings.HasPrefix(p, "* LOST ") || !strings.HasSuffix(p, " reason=expired") {
					t.Fatalf("pushed %q at the end, want LOST reason=expired", p)
				}
			}
			other := agenttest.Dial(t, a.Config.Socket.Path)
			for _, name := range names {
				if r := other.Do("LOCK " + name + " wait=1m"); r.Kind != "OK" { // woken by the release
					t.Fatalf("%s after its end: %s", name, r.Line)
				}
			}
		})
	}
}

// advance moves clock by d once the agent's timers are armed: every timer
// an event armed shows in TimerArmed, and none for a while means the
// agent is idle (a watchdog that armed its expiry after the move would
// see the end only at the next one).
func advance(clock *clock.Fake, d time.Duration) {
	for quiet := false; !quiet; {
		select {
		case <-clock.TimerArmed():
		case <-time.After(20 * time.Millisecond):
			quiet = true
		}
	}
	clock.Advance(d)
}
