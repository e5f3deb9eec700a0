package quorum

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/redistest"
	"github.com/lock-agent/lock-agent/quorum/scripts"
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
	// The grant returned once a majority had it: m0 or m1 may get it
	// just after, and a retag there before it would find no holder.
	awaitOnEveryMaster(t, servers, "t:{r}:h:h")
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

// TestAWriteBackNeverLowersARecordsFence: a grant's fence write-back (or
// settled mark) sent in the background may reach a master after the
// hold's first hand-over retagged the record with a later fence: the
// record keeps the later one (CI once saw the retag's fence undone). A
// later fence that is the master's own (it ran the grant late) is
// replaced, as one below.
func TestAWriteBackNeverLowersARecordsFence(t *testing.T) {
	servers := redistest.Start(t, 3)
	c := newCluster(t, servers, time.Second)
	ctx := context.Background()
	plantClaim(servers[0], "wb", "h", Claim{})
	servers[0].Do("HSET", "t:{wb}:h:h", "fence", "12", "settled", "12") // retagged to 12
	keys, args := c.raiseFenceArgs("wb", c.keys.Holder("wb", "h"), 10, 4, true)
	if err := c.masters[0].eval(ctx, scripts.RaiseFence, keys, args).Error(); err != nil {
		t.Fatal(err)
	}
	if f, _ := servers[0].Do("HGET", "t:{wb}:h:h", "fence"); f != "12" {
		t.Fatalf("a late write-back of fence 10 left the record at %q, want the retag's 12", f)
	}
	if s, _ := servers[0].Do("HGET", "t:{wb}:h:h", "settled"); s != "12" {
		t.Fatalf("a late write-back of fence 10 left the record marked %q, want 12", s)
	}
	plantClaim(servers[2], "wb", "h", Claim{})
	servers[2].Do("HSET", "t:{wb}:h:h", "fence", "11") // its own, from running the grant late
	if err := c.masters[2].eval(ctx, scripts.RaiseFence, keys, args).Error(); err != nil {
		t.Fatal(err)
	}
	if f, _ := servers[2].Do("HGET", "t:{wb}:h:h", "fence"); f != "10" {
		t.Fatalf("a write-back of fence 10 left a master's own later fence at %q", f)
	}
	plantClaim(servers[1], "wb", "h", Claim{}) // fence 1: behind the grant
	if err := c.masters[1].eval(ctx, scripts.RaiseFence, keys, args).Error(); err != nil {
		t.Fatal(err)
	}
	if f, _ := servers[1].Do("HGET", "t:{wb}:h:h", "fence"); f != "10" {
		t.Fatalf("a write-back of fence 10 left a record behind it at %q", f)
	}
}
