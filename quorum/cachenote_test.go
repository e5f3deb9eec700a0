package quorum

import (
	"context"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/redistest"
)

// TestCheckOfAKeptRecordCountsFencesLentSinceItsNote: the masters learn
// what a cache's lendings changed only from its agent's notes, at most
// once per renewal tick (NoteCaches), so CHECK of a kept exclusive record
// answers current for a fence above the noted one (lent since) and, at the
// noted fence, as the noted mark says; a fence below the noted one, a
// fence of a record not kept, or above a kept shared record's, is not
// current.
func TestCheckOfAKeptRecordCountsFencesLentSinceItsNote(t *testing.T) {
	ctx := context.Background()
	servers := redistest.Start(t, 3)
	c := newCluster(t, servers, time.Second)
	check := func(step, name string, fence int64, want bool) {
		t.Helper()
		if got, err := c.Check(ctx, name, fence); err != nil || got != want {
			t.Fatalf("%s: CHECK %s fence=%d: %v %v, want %v", step, name, fence, got, err, want)
		}
	}
	r := req("k", "h")
	r.FenceBlock = 16
	g, err := acquire(ctx, c, r)
	if err != nil {
		t.Fatal(err)
	}
	f := g.Fence
	check("held", "k", f, true)
	check("held", "k", f+1, false) // not kept: only the record's own fence
	if kept, err := c.CacheOrRelease(ctx, "k", "h"); err != nil || !kept {
		t.Fatalf("CacheOrRelease: %v %v", kept, err)
	}
	check("cached", "k", f, false)
	check("cached", "k", f+1, true) // lent since, not yet noted
	check("cached", "k", f-1, false)
	note := func(fence int64, cached bool) {
		t.Helper()
		rec := g.Record
		rec.Fence, rec.Who.Owner = fence, "lent"
		if a := c.NoteCaches(ctx, []CacheNote{{Name: "k", Holder: "h", Record: rec, Cached: cached}}); a[0].Wanted || a[0].Missed {
			t.Fatalf("a note every master took of a record no acquire met: %+v", a[0])
		}
	}
	note(f+3, false) // lent to f+3, which holds it
	check("noted lent", "k", f+3, true)
	check("noted lent", "k", f+2, false)
	check("noted lent", "k", f+4, true)
	holders, err := c.Who(ctx, "k")
	if err != nil || len(holders) != 1 || holders[0].Record.Fence != f+3 || holders[0].Record.Who.Owner != "lent" || holders[0].Record.Cached {
		t.Fatalf("WHO after a note of a lent holder: %+v %v", holders, err)
	}
	note(f+3, true) // given back
	check("noted back", "k", f+3, false)
	check("noted back", "k", f+4, true)
	note(f+2, false) // a late note never lowers the fence
	check("late note", "k", f+2, false)
	check("late note", "k", f+3, true)
	// A note on its way when the cache became a run (Unkeep) leaves the
	// run's record unmarked.
	c.Unkeep(ctx, "k", "h")
	note(f+5, true)
	check("a late note after Unkeep", "k", f+5, true)
	if _, err := c.Release(ctx, "k", "h"); err != nil {
		t.Fatal(err)
	}
	check("released", "k", f+4, false)

	// A kept shared record: other agents' readers may hold fences above
	// its noted one, so only its noted fence counts.
	r = req("s", "h")
	r.Claim.Mode, r.FenceBlock = Shared, 16
	if g, err = acquire(ctx, c, r); err != nil {
		t.Fatal(err)
	}
	if kept, err := c.CacheOrRelease(ctx, "s", "h"); err != nil || !kept {
		t.Fatalf("CacheOrRelease: %v %v", kept, err)
	}
	check("cached shared", "s", g.Fence+1, false)
}

// TestNoteCachesSaysWhichWereWanted: a note of a record an acquire found
// in its way says so, and a note of a record that is gone does nothing.
func TestNoteCachesSaysWhichWereWanted(t *testing.T) {
	ctx := context.Background()
	servers := redistest.Start(t, 3)
	c := newCluster(t, servers, time.Second)
	var notes []CacheNote
	for _, name := range []string{"a", "b"} {
		g, err := acquire(ctx, c, req(name, "h"))
		if err != nil {
			t.Fatal(err)
		}
		notes = append(notes, CacheNote{Name: name, Holder: "h", Record: g.Record, Cached: true})
	}
	if _, r, err := c.Acquire(ctx, req("b", "other")); err != nil || r == nil {
		t.Fatalf("another holder's acquire of b: %+v %v", r, err)
	}
	notes = append(notes, CacheNote{Name: "gone", Holder: "h", Record: notes[0].Record, Cached: true})
	if got := c.NoteCaches(ctx, notes); got[0].Wanted || !got[1].Wanted || got[2].Wanted {
		t.Fatalf("wanted: %v, want [false true false]", got)
	}
	for _, s := range servers {
		if n, _ := s.Do("EXISTS", c.keys.Holder("gone", "h")); n != "0" && n != "" {
			t.Fatalf("%s: a note made a record: %q", s.Addr, n)
		}
	}
}

// TestANoteTwoMastersMissedSaysSo: a note that two masters of three did
// not take (paused to its deadline) says so, for its agent to send it
// again (a master that missed it counts every fence above the earlier
// note current); one that one master missed does not.
func TestANoteTwoMastersMissedSaysSo(t *testing.T) {
	ctx := context.Background()
	servers := redistest.Start(t, 3)
	c := newCluster(t, servers, time.Second)
	g, err := acquire(ctx, c, req("m", "h"))
	if err != nil {
		t.Fatal(err)
	}
	note := []CacheNote{{Name: "m", Holder: "h", Record: g.Record, Cached: true}}
	t.Cleanup(func() {
		for _, s := range servers {
			s.Resume()
		}
	})
	for _, paused := range []int{1, 2} {
		for i := range paused {
			servers[i].Pause()
		}
		got := c.NoteCaches(ctx, note)[0]
		for i := range paused {
			servers[i].Resume()
		}
		if want := paused == 2; got.Missed != want {
			t.Errorf("%d of 3 masters paused: Missed = %v, want %v", paused, got.Missed, want)
		}
	}
}
