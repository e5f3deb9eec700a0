package agent_test

import (
	"strings"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// TestRevokeAndTailsAreCounted: a REVOKE of a hold with a delay counts a
// revocation, a loss (revoked, whatever the reason word) and a tail; a
// clean UNLOCK of a hold with a delay counts no tail.
func TestRevokeAndTailsAreCounted(t *testing.T) {
	servers := redistest.Start(t, 3)
	a := agenttest.Start(t, agenttest.Config(t, servers, 3*time.Second))
	c := agenttest.Dial(t, a.Config.Socket.Path)
	for _, l := range []string{"LOCK m/clean delay=1s", "UNLOCK m/clean", "LOCK m/revoked delay=1s"} {
		if r := c.Do(l); r.Kind != "OK" {
			t.Fatalf("%s: %s", l, r.Line)
		}
	}
	if r := c.Do("REVOKE m/revoked reason=drill"); r.Kind != "OK" || r.Int("n") != 1 {
		t.Fatalf("REVOKE: %s", r.Line)
	}
	if p := c.Push(time.Second); !strings.HasPrefix(p, "* LOST m/revoked ") || !strings.HasSuffix(p, " reason=drill") {
		t.Fatalf("push %q", p)
	}
	// The holder's end (which counts the tail) may answer after REVOKE saw it land.
	s := scrapeAgent(t, a)
	for deadline := time.Now().Add(2 * time.Second); s.value("lock_agent_tails_total") < 1 && time.Now().Before(deadline); {
		c.Do("PING")
		s = scrapeAgent(t, a)
	}
	for _, want := range []struct {
		name   string
		labels []string
		value  float64
	}{
		{"lock_agent_revocations_total", nil, 1},
		{"lock_agent_tails_total", nil, 1},
		{"lock_agent_losses_total", []string{"reason", "revoked"}, 1},
	} {
		if got := s.value(want.name, want.labels...); got != want.value {
			t.Errorf("%s%v = %v, want %v", want.name, want.labels, got, want.value)
		}
	}
}
