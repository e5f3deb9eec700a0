package tests

import (
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// TestHostileMarkerEditedByHand: an operator edits one master's epoch
// marker by hand (deletes it, deletes a field, writes garbage, writes
// another agent's settings): the master is out of service for at most a
// quarantine or two, then votes again, and the agent grants throughout
// (the other two are a majority).
func TestHostileMarkerEditedByHand(t *testing.T) {
	t.Parallel() // see TestMain
	servers := redistest.Start(t, 3)
	a := agenttest.Start(t, agenttest.Config(t, servers, time.Second))
	c := agenttest.Dial(t, a.Config.Socket.Path)
	awaitRecorded(t, c, 3)
	for _, edit := range [][]string{
		{"DEL", "lock-agent:epoch"},
		{"HDEL", "lock-agent:epoch", "epoch"},
		{"HDEL", "lock-agent:epoch", "settings"},
		{"HDEL", "lock-agent:epoch", "run"},
		{"HDEL", "lock-agent:epoch", "until"},
		{"HDEL", "lock-agent:epoch", "floor"},
		{"HSET", "lock-agent:epoch", "until", "garbage"},
		{"HSET", "lock-agent:epoch", "floor", "garbage"},
		{"HSET", "lock-agent:epoch", "settings", "lease=5s;drift=0.01"},
		{"HSET", "lock-agent:epoch", "settings", "garbage"},
		{"HSET", "lock-agent:epoch", "settings", "a b c"},
		{"HSET", "lock-agent:epoch", "epoch", ""},
		{"HSET", "lock-agent:epoch", "run", "0000"},
		{"HSET", "lock-agent:epoch", "how", "garbage"},
	} {
		out, err := servers[0].Do(edit...)
		t.Logf("%v: %q %v", edit, out, err)
		for i := 0; i < 5; i++ {
			if r := c.Do("LOCK k wait=2s"); r.Kind != "OK" {
				t.Errorf("after %v: LOCK %s", edit, r.Line)
			} else {
				c.Do("UNLOCK k")
			}
		}
		c.AwaitMastersWithin(5*time.Second, "up", 3)
		awaitRecorded(t, c, 3)
	}
}
