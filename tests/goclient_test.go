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
	servers[0].Pause()
	servers[1].Pause()
	start := time.Now()
	// The watchdog ends the hold lease − drift − lead (968ms here) after its
	// last renewal, which came before the pause; 100ms is scheduling slack
	// for a loaded test host.
	select {
	case <-l.Done():
	case <-time.After(lease + 100*time.Millisecond):
		t.Fatal("Done not closed within one lease of losing quorum")
	}
	var lost *lockagent.LostError
	if !errors.As(l.Err(), &lost) || lost.Reason != "quorum" {
		t.Fatalf("err = %v", l.Err())
	}
	t.Logf("Done closed %v after two of three masters stopped (lease %v)", time.Since(start), lease)
}
