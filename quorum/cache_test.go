package quorum

import (
	"context"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// TestAKeptRecordSaysSoWhetherMarkedCachedOrNot: a record kept as a cache
// (CacheOrRelease) refuses another holder's acquire as only kept and
// cached; unmarked (lent to a local client, or given back with the mark
// not yet written) still as only kept, so a wait=0 try asks its agent
// rather than answer BUSY; the mark's next write reads that an acquire
// found it in its way; a record its agent no longer keeps (Unkeep: a
// cohort run) is neither.
func TestAKeptRecordSaysSoWhetherMarkedCachedOrNot(t *testing.T) {
	ctx := context.Background()
	servers := redistest.Start(t, 3)
	c := newCluster(t, servers, time.Second)
	refusal := func(step string) Refusal {
		t.Helper()
		g, r, err := c.Acquire(ctx, req("k", "other-"+step)) // a holder id refused once is given back: a new one each time
		if err != nil || r == nil {
			t.Fatalf("%s: another holder's acquire: %+v %v %v", step, g, r, err)
		}
		return *r
	}
	if _, err := acquire(ctx, c, req("k", "h")); err != nil {
		t.Fatal(err)
	}
	if r := refusal("held"); r.OnlyCached || r.OnlyKept {
		t.Fatalf("a client's hold: %+v, want neither only cached nor only kept", r)
	}
	if _, wanted := c.MarkCached(ctx, "k", "h", false); !wanted {
		t.Fatal("an acquire found the record in its way: MarkCached does not say it was wanted")
	}
	// A fresh hold: CacheOrRelease keeps only a record no acquire marked wanted.
	if _, err := c.Release(ctx, "k", "h"); err != nil {
		t.Fatal(err)
	}
	if _, err := acquire(ctx, c, req("k", "h2")); err != nil {
		t.Fatal(err)
	}
	if kept, err := c.CacheOrRelease(ctx, "k", "h2"); err != nil || !kept {
		t.Fatalf("CacheOrRelease: %v %v", kept, err)
	}
	if _, wanted := c.MarkCached(ctx, "k", "h2", true); wanted {
		t.Fatal("a record no acquire met says it was wanted")
	}
	if r := refusal("cached"); !r.OnlyCached || !r.OnlyKept {
		t.Fatalf("a cached record: %+v, want only cached and only kept", r)
	}
	if _, wanted := c.MarkCached(ctx, "k", "h2", false); !wanted {
		t.Fatal("MarkCached after an acquire met the record does not say it was wanted")
	}
	if r := refusal("lent"); r.OnlyCached || !r.OnlyKept {
		t.Fatalf("a kept record lent (mark cleared): %+v, want only kept, not only cached", r)
	}
	c.Unkeep(ctx, "k", "h2")
	// Unkeep returns once a majority has it; a refusal counts any master's
	// kept mark (seen: the third master's, not yet cleared, beside the
	// suite's other parts). It is awaited on every master.
	for _, s := range servers {
		lockagenttest.Eventually(t, 5*time.Second, func() bool {
			v, _ := s.Do("HGET", c.keys.Holder("k", "h2"), "kept")
			return v != "1"
		}, "%s still marks the record kept", s.Addr)
	}
	if r := refusal("unkept"); r.OnlyCached || r.OnlyKept {
		t.Fatalf("a record no longer kept: %+v, want neither", r)
	}
}
