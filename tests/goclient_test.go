package tests

import (
	"context"
	"errors"
	"testing"
	"time"

	lockagent "github.com/lock-agent/lock-agent/clients/go"
	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// TestGoClientDoneClosesWhenQuorumIsLost: with two of three masters
// stopped, the agent cannot renew, and every lock's Done closes within one
// lease, with reason quorum.
func TestGoClientDoneClosesWhenQuorumIsLost(t *testing.T) {
	servers := redistest.Start(t, 3)
	const lease = time.Second
	a := agenttest.Start(t, agenttest.Config(t, servers, lease))
	t.Cleanup(func() {
		for _, s := range servers {
			s.Resume()
		}
	})
	ctx := context.Background()
	c, err := lockagent.Dial(ctx, a.Config.Socket.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, err := c.Lock(ctx, "client/quorum")
	if err != nil {
		t.Fatal(err)
	}
	stalls := agenttest.MeasureStalls(t)
	servers[0].Pause()
	servers[1].Pause()
	start := time.Now()
	// The watchdog ends the hold lease − drift − lead (968ms here) after its
	// last renewal, which came before the pause, on the time the host gives
	// the process: 100ms of slack, and what a loaded host took from it.
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done not closed within 10s of losing quorum")
	}
	// (The stalls are capped at half a lease: a meter that read the
	// agent's own CPU use as stalls must not excuse any lateness.)
	if took, bound := time.Since(start), lease+100*time.Millisecond+min(stalls.Stalled(), lease/2); took > bound {
		t.Fatalf("Done closed %v after two of three masters stopped, want within one lease and the %v the process stood stalled", took, stalls.Stalled())
	}
	var lost *lockagent.LostError
	if !errors.As(l.Err(), &lost) || lost.Reason != "quorum" {
		t.Fatalf("err = %v", l.Err())
	}
	t.Logf("Done closed %v after two of three masters stopped (lease %v; the process stood stalled %v)", time.Since(start), lease, stalls.Stalled())
}
