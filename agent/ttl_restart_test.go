package agent_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/quorum/rules"

	"github.com/lock-agent/lock-agent/agent"
	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/quorum/clock"
)

// TestAnHourLongTTLHoldOutlivesAMasterRestart: a ttl=1h hold (longer than
// any lock.max_ttl the agent has: it bounds nothing now) is renewed by the
// watchdog across a master's restart with its data lost, the restarted
// master sits out no more than the quarantine a lease implies, not the
// ttl, and the hold ends with LOST reason=expired exactly at its ttl on
// the agent's clock.
func TestAnHourLongTTLHoldOutlivesAMasterRestart(t *testing.T) {
	clock := clock.NewFake(time.Now())
	const lease = 30 * time.Minute
	a, servers := start(t, func(c *agent.Config) {
		c.Lock.Lease, c.Lock.MaxTTL, c.Clock = lease, time.Minute, clock
	})
	c := agenttest.Dial(t, a.Config.Socket.Path)
	if r := c.Do("LOCK t ttl=1h"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	servers[0].Restart() // empty: it lost the hold

	var status []map[string]string
	lockagenttest.Eventually(t, 10*time.Second, func() bool {
		status = c.Do("STATUS").Data
		return status[0]["state"] == "quarantined"
	}, "the restarted master never showed quarantined: %v", &status)
	left := time.Duration(agenttest.Reply{Fields: status[0]}.Int("quarantine_left")) * time.Millisecond
	if q := agent.Quarantine(a.Config.Lock); left <= 0 || left > q {
		t.Fatalf("the restarted master sits out %v, want at most the quarantine of a lease, %v", left, q)
	}

	// Renewals every lease/3 keep the hold on the two other masters: each
	// moves its validity to a lease's from now, or to its end if sooner
	// (HOLDS shows it).
	renewed := rules.Validity(lease, 0, a.Config.Lock.DriftFactor)
	for elapsed := lease / 3; elapsed < time.Hour; elapsed += lease / 3 {
		advance(clock, lease/3)
		want := min(time.Hour-elapsed, renewed).Milliseconds()
		var r agenttest.Reply
		lockagenttest.Eventually(t, 10*time.Second, func() bool {
			r = c.Do("HOLDS")
			return len(r.Data) == 1 && r.Data[0]["validity"] == itoa(want)
		}, "after %v, HOLDS %v: want validity=%d (renewed)", elapsed, &r.Data, want)
		if p := c.Push(0); p != "" {
			t.Fatalf("pushed %q at %v", p, elapsed)
		}
	}
	advance(clock, lease/3-time.Millisecond)
	c.Do("PING")
	if p := c.Push(50 * time.Millisecond); p != "" {
		t.Fatalf("pushed %q a millisecond before the end", p)
	}
	advance(clock, time.Millisecond)
	if p := c.Push(5 * time.Second); !strings.HasPrefix(p, "* LOST t ") || !strings.HasSuffix(p, " reason=expired") {
		t.Fatalf("pushed %q at the end, want LOST reason=expired", p)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
