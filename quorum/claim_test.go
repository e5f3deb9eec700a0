package quorum

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/redistest"
)

func claimReq(name, holder string, claim Claim) AcquireRequest {
	return AcquireRequest{Name: name, Holder: holder, Lease: 5 * time.Second, Claim: claim, Who: Who{Agent: "t", Owner: holder}}
}

// TestClaimKindsOnRealMasters: shared claims go together and exclude an
// exclusive one; a semaphore hands out distinct slots and refuses another
// limit (or a lock) as a conflict.
func TestClaimKindsOnRealMasters(t *testing.T) {
	servers := redistest.Start(t, 3)
	c := newCluster(t, servers, time.Second)
	ctx := context.Background()
	shared, sem3 := Claim{Mode: Shared}, Claim{Limit: 3}
	for _, h := range []string{"r1", "r2"} {
		if _, err := acquire(ctx, c, claimReq("rw", h, shared)); err != nil {
			t.Fatalf("shared %s: %v", h, err)
		}
	}
	if _, err := acquire(ctx, c, claimReq("rw", "w", Claim{})); !errors.Is(err, ErrBusy) {
		t.Fatalf("exclusive while shared holders: %v, want busy", err)
	}
	who, err := c.Who(ctx, "rw")
	if err != nil || len(who) != 2 || who[0].Record.Claim.Mode != Shared {
		t.Fatalf("who = %+v %v", who, err)
	}
	c.Release(ctx, "rw", "r1")
	c.Release(ctx, "rw", "r2")
	if _, err := acquire(ctx, c, claimReq("rw", "w2", Claim{})); err != nil {
		t.Fatalf("exclusive once the readers left: %v", err)
	}
	if _, err := acquire(ctx, c, claimReq("rw", "r3", shared)); !errors.Is(err, ErrBusy) {
		t.Fatalf("shared while an exclusive holder: %v, want busy", err)
	}

	seen := map[int]bool{}
	for i := range 3 {
		g, err := acquire(ctx, c, claimReq("sem", fmt.Sprintf("s%d", i), sem3))
		if err != nil || g.Slot < 1 || g.Slot > 3 || seen[g.Slot] || g.Record.Claim.Slot != g.Slot {
			t.Fatalf("semaphore holder %d: %+v %v (slots so far %v)", i, g, err, seen)
		}
		seen[g.Slot] = true
	}
	if _, err := acquire(ctx, c, claimReq("sem", "s4", sem3)); !errors.Is(err, ErrBusy) {
		t.Fatalf("a fourth holder of limit=3: %v, want busy", err)
	}
	var round *RoundError
	if _, err := acquire(ctx, c, claimReq("sem", "s5", Claim{Limit: 5})); !errors.Is(err, ErrConflict) || !errors.As(err, &round) || round.HeldLimit != 3 {
		t.Fatalf("limit=5 on a limit=3 semaphore: %v, want a conflict naming 3", err)
	}
	if _, err := acquire(ctx, c, claimReq("sem", "plain", Claim{})); !errors.Is(err, ErrConflict) {
		t.Fatalf("a lock on a semaphore: %v, want a conflict", err)
	}
	if _, err := acquire(ctx, c, claimReq("rw", "sem", sem3)); !errors.Is(err, ErrConflict) || !errors.As(err, &round) || round.HeldLimit != 1 {
		t.Fatalf("a semaphore on a locked name: %v, want a conflict naming 1", err)
	}
}

// plantClaim records a foreign holder of name with claim on s, for 5 s.
func plantClaim(s *redistest.Server, name, holder string, claim Claim) {
	key := "t:{" + name + "}:h:" + holder
	s.Do("HSET", key, "mode", string(claim.mode()), "limit", fmt.Sprint(claim.limit()), "slot", fmt.Sprint(claim.Slot), "fence", "1", "agent", "elsewhere")
	s.Do("PEXPIRE", key, "5000")
	s.Do("SADD", "t:{"+name+"}", holder)
}

// TestSplitVotesPerKind: masters that disagree. A semaphore whose masters
// grant different slots keeps the slot with a majority and gives back the
// others; with no slot on a majority it gives back everything. A shared
// claim wins on the masters where only readers hold.
func TestSplitVotesPerKind(t *testing.T) {
	servers := redistest.Start(t, 3)
	c := newCluster(t, servers, time.Second)
	ctx := context.Background()

	// m0 has slot 1 taken, so it grants slot 2; m1 and m2 grant slot 1.
	plantClaim(servers[0], "split", "other", Claim{Limit: 2, Slot: 1})
	g, err := acquire(ctx, c, claimReq("split", "h", Claim{Limit: 2}))
	if err != nil || g.Slot != 1 {
		t.Fatalf("got %+v %v, want slot 1 (the majority's)", g, err)
	}
	awaitKeys(t, servers[:1], "t:{split}:h:h") // m0's grant of the losing slot 2 is given back, in the background

	// Every master grants a different slot: nothing is won, all is given back.
	plantClaim(servers[0], "three", "a", Claim{Limit: 3, Slot: 1})
	plantClaim(servers[0], "three", "b", Claim{Limit: 3, Slot: 2}) // m0 grants 3
	plantClaim(servers[1], "three", "a", Claim{Limit: 3, Slot: 1})
	plantClaim(servers[1], "three", "c", Claim{Limit: 3, Slot: 3}) // m1 grants 2
	plantClaim(servers[2], "three", "b", Claim{Limit: 3, Slot: 2})
	plantClaim(servers[2], "three", "c", Claim{Limit: 3, Slot: 3}) // m2 grants 1
	_, err = acquire(ctx, c, claimReq("three", "h", Claim{Limit: 3}))
	var round *RoundError
	if !errors.Is(err, ErrBusy) || !errors.As(err, &round) || round.Yes != 3 {
		t.Fatalf("three slots, three masters: %v, want a busy split of 3 grants", err)
	}
	awaitKeys(t, servers, "t:{three}:h:h") // no master keeps a grant of a split round

	// Readers on m1, a writer on m0: a reader wins on m1 and m2.
	plantClaim(servers[0], "rws", "writer", Claim{})
	plantClaim(servers[1], "rws", "reader", Claim{Mode: Shared})
	if _, err := acquire(ctx, c, claimReq("rws", "h", Claim{Mode: Shared})); err != nil {
		t.Fatalf("a reader with readers on m1 and nothing on m2: %v", err)
	}
	if _, err := acquire(ctx, c, claimReq("rws", "w", Claim{})); !errors.Is(err, ErrBusy) {
		t.Fatalf("a writer against those readers: %v, want busy", err)
	}
}
