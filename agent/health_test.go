package agent_test

import (
	"strings"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/agent"
	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// TestHealthSeesAWedgedLoop wedges each of the agent's loops in its own
// goroutine: Healthy names it, and only it, and recovers once it turns again.
func TestHealthSeesAWedgedLoop(t *testing.T) {
	// A loop silent for a second is wedged; less is a loaded host's
	// scheduling (200ms failed under two CPU-bound processes and -race).
	const stale = time.Second
	agent.SetHealthTiming(t, 20*time.Millisecond, stale)
	a := agenttest.Start(t, agenttest.Config(t, redistest.Start(t, 3), 3*time.Second))
	healthy := func() {
		t.Helper()
		var err error
		lockagenttest.Eventually(t, 2*time.Second, func() bool { err = a.Healthy(); return err == nil }, "not healthy: %v", &err)
		// and it stays so past a stale window: the loops keep beating
		time.Sleep(stale + stale/5)
		if err := a.Healthy(); err != nil {
			t.Fatalf("healthy, then not: %v", err)
		}
	}
	healthy()
	for _, loop := range []string{"accept loop", "renewal watchdog"} {
		t.Run(loop, func(t *testing.T) {
			_, release := agent.Wedge(t, loop)
			var err error
			lockagenttest.Eventually(t, stale+2*time.Second, func() bool { err = a.Healthy(); return err != nil },
				"still healthy %v after the %s was wedged", stale+2*time.Second, loop)
			if !strings.Contains(err.Error(), loop+" silent for") || strings.Count(err.Error(), "silent") != 1 {
				t.Fatalf("with the %s wedged: %v", loop, err)
			}
			release()
			healthy()
		})
	}
	// A wedged accept loop is a real one: a client is not served.
	parked, release := agent.Wedge(t, "accept loop")
	select {
	case <-parked:
	case <-time.After(5 * time.Second):
		t.Fatal("the accept loop never came to its next beat")
	}
	c := agenttest.Dial(t, a.Config.Socket.Path)
	_, reply := c.Send("PING")
	select {
	case r := <-reply:
		t.Fatalf("served with the accept loop wedged: %s", r.Line)
	case <-time.After(300 * time.Millisecond):
	}
	release()
	if r := c.Await(reply); r.Kind != "OK" {
		t.Fatalf("PING after the accept loop turned again: %s", r.Line)
	}
}
