package quorum

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/redistest"
)

// TestBreaker18RetagReturnsPastAPausedMasterAndNeverGoesBack: with a
// master paused, Retag returns once a majority has the new holder (not
// after the paused master's deadline), so that the next hand-over's retag
// is not held up; and a retag that reaches a master after a later one (as
// the paused master may get them once it resumes) leaves the later fence.
func TestBreaker18RetagReturnsPastAPausedMasterAndNeverGoesBack(t *testing.T) {
	servers := redistest.Start(t, 3)
	t.Cleanup(func() { servers[2].Resume() })
	c := newCluster(t, servers, time.Second)
	ctx := context.Background()
	g, err := acquire(ctx, c, blockReq("r", "h", 4))
	if err != nil {
		t.Fatal(err)
	}
	later, earlier := g.Record, g.Record
	later.Fence, earlier.Fence = g.Fence+2, g.Fence+1
	servers[2].Pause()
	start := time.Now()
	if n := c.Retag(ctx, "r", "h", later); n != 2 {
		t.Fatalf("retag landed on %d masters", n)
	}
	if took := time.Since(start); took >= 2*c.cfg.MasterTimeout {
		t.Errorf("Retag took %v with a master paused: it waited for that master", took)
	}
	if n := c.Retag(ctx, "r", "h", earlier); n != 2 { // one that comes late
		t.Fatalf("a late retag landed on %d masters", n)
	}
	for i, s := range servers[:2] {
		if f, err := s.Do("HGET", "t:{r}:h:h", "fence"); err != nil || f != strconv.FormatInt(later.Fence, 10) {
			t.Errorf("master %d records fence %q (%v), want the later retag's %d", i, f, err, later.Fence)
		}
	}
}
