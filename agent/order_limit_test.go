package agent_test

import (
	"testing"

	"github.com/lock-agent/lock-agent/agent"
	"github.com/lock-agent/lock-agent/internal/agenttest"
)

// TestAWhoThatWaitsForNothingIsNotLimited: a session that holds as many
// names as max_holds_per_session may still ask WHO of one of them. The
// WHO waits for nothing (no LOCK or release of the name is under way), so
// it is not one of the requests waiting for their turn that the limit
// counts, though later requests on the hold wait for it.
func TestAWhoThatWaitsForNothingIsNotLimited(t *testing.T) {
	a, _ := start(t, func(c *agent.Config) { c.Limits.MaxHoldsPerSession = 1 })
	c := agenttest.Dial(t, a.Config.Socket.Path)
	if r := c.Do("LOCK x"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	if r := c.Do("WHO x"); r.Kind != "OK" || len(r.Data) != 1 {
		t.Fatalf("WHO of a held name at the session's limit: %s (%d DATA lines)", r.Line, len(r.Data))
	}
}
