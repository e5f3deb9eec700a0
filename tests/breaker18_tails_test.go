package tests

import (
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/agenttest"
)

// TestBreaker18TailOutlivesRestartsOfTwoMasters: a hold with delay= (or
// min_hold=) lives through two masters restarting empty one after the
// other, each re-created by the watchdog's repair once its quarantine is
// over, so the hold stays on a majority throughout. Its tail must too: a
// majority of the masters now hold a re-created record, and the delay (the
// min_hold) must still keep the name from the next holder once the hold
// ends.
func TestBreaker18TailOutlivesRestartsOfTwoMasters(t *testing.T) {
	for _, tc := range []struct{ name, lock, end string }{
		{"delay, session closed", "delay=4s", "close"},
		{"min_hold, UNLOCK", "min_hold=8s", "unlock"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b, servers := twoAgents(t, time.Second)
			holder, other := agenttest.Dial(t, a.Config.Socket.Path), agenttest.Dial(t, b.Config.Socket.Path)
			if r := holder.Do("LOCK br/tail " + tc.lock); r.Kind != "OK" {
				t.Fatal(r.Line)
			}
			for _, i := range []int{0, 1} {
				servers[i].Restart()
				lockagenttest.Eventually(t, 5*time.Second, func() bool { return servers[i].Keys("lock-agent:{br/tail}:h:*") == 1 },
					"the watchdog never re-created the hold on the master that restarted empty")
			}
			if tc.end == "close" {
				holder.Close()
			} else if r := holder.Do("UNLOCK br/tail"); r.Kind != "OK" {
				t.Fatal(r.Line)
			}
			lockagenttest.Eventually(t, 5*time.Second, func() bool { return other.Do("WHO br/tail").Int("n") == 0 },
				"the hold never ended in the masters")
			if r := other.Do("LOCK br/tail wait=0"); r.Kind != "BUSY" {
				t.Fatalf("LOCK wait=0 on the other agent just after a hold with %s ended: %q, want BUSY", tc.lock, r.Line)
			}
		})
	}
}
