package quorum

// Hostile review tests against real redis-servers.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// TestHostileRepairResurrectsAReleasedHold: a release (rounds connection)
// races the watchdog's renewal (bulk connection), as an UNLOCK does with a
// renewal round already in flight. Where the release lands first it DELetes
// the key and, because it found one, leaves no tombstone; the renewal there
// then answers "gone". Where the renewal lands first it counts OK, so a
// majority renewed, and repair re-creates the hold on the master that just
// released it: a released hold lives on for a whole lease.
func TestHostileRepairResurrectsAReleasedHold(t *testing.T) {
	servers := redistest.Start(t, 3)
	c := newCluster(t, servers, time.Second)
	ctx := context.Background()
	const lease = 5 * time.Second
	deadline := time.Now().Add(5 * time.Second)
	for iter := 0; iter < 400 && time.Now().Before(deadline); iter++ {
		name, holder := fmt.Sprintf("rz%d", iter), fmt.Sprintf("h%d", iter)
		r := req(name, holder)
		r.Lease = lease
		g, err := acquire(ctx, c, r)
		if err != nil {
			continue
		}
		var wg sync.WaitGroup
		var res []RenewResult
		wg.Add(2)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(rand.IntN(400)) * time.Microsecond)
			res = c.Renew(ctx, lease, []RenewKey{{Name: name, Holder: holder, Record: g.Record}})
		}()
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(rand.IntN(400)) * time.Microsecond)
			c.Release(ctx, name, holder)
		}()
		wg.Wait()
		// The release's answers from the masters it did not wait for land
		// in the background (50ms was too short on a loaded host); a
		// resurrected hold stays for its 5s lease, well past the wait.
		key := "t:{" + name + "}:h:" + holder
		var on []int
		lockagenttest.Eventually(t, 2*time.Second, func() bool {
			on = nil
			for i, s := range servers {
				if s.Keys(key) > 0 {
					on = append(on, i)
				}
			}
			return len(on) == 0
		}, "iteration %d: hold %s was released (Release returned), yet masters %v still have it 2s later; renew result %+v",
			iter, holder, &on, res[0])
	}
}

// TestHostileSemaphoreUnderFaults: holders of a limit=2 semaphore come and
// go while masters are paused and restarted empty. A hold lasts from its
// grant until its release is sent (before its validity ends): never more
// than two at once, never two on one slot, and a grant answered before another was asked for
// has the lower fence.
func TestHostileSemaphoreUnderFaults(t *testing.T) {
	t.Parallel() // waits out faults and quarantines; judges no latency
	servers := redistest.Start(t, 3)
	const lease = 400 * time.Millisecond
	c := newCluster(t, servers, lease+100*time.Millisecond)
	t.Cleanup(func() {
		for _, s := range servers {
			s.Resume()
		}
	})
	ctx := context.Background()
	stop := time.Now().Add(12 * time.Second)
	type iv struct {
		call       time.Time // when its Acquire was called
		start, end time.Time
		slot       int
		fence      int64
		who        int
	}
	var mu sync.Mutex
	var ivs []iv
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(3, 4))
		for time.Now().Before(stop) {
			i := rng.IntN(3)
			if rng.IntN(3) == 0 {
				servers[i].Restart()
			} else {
				redistest.PauseFor(time.Duration(100+rng.IntN(500))*time.Millisecond, servers, i)
			}
			time.Sleep(time.Duration(100+rng.IntN(400)) * time.Millisecond)
		}
	}()
	for w := range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			for n := 0; time.Now().Before(stop); n++ {
				r := claimReq("hsem", fmt.Sprintf("w%d-%d", w, n), Claim{Limit: 2})
				r.Lease = lease
				call := time.Now()
				g, err := acquire(ctx, c, r)
				if err != nil {
					time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
					continue
				}
				start := time.Now()
				hold := time.Duration(rng.IntN(150)) * time.Millisecond
				end := start.Add(hold)
				if end.After(g.Deadline) {
					end = g.Deadline
				}
				time.Sleep(time.Until(end))
				// The holder relies on its slot until its validity ends,
				// not later: a sleep that a loaded host stretched past
				// g.Deadline is the holder's own pause, which only a fence
				// guards against (it failed once so, "overlapping" a grant
				// made after this one's deadline).
				if end = time.Now(); end.After(g.Deadline) {
					end = g.Deadline
				}
				c.Release(ctx, "hsem", r.Holder)
				mu.Lock()
				ivs = append(ivs, iv{call, start, end, g.Slot, g.Fence, w})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	sort.Slice(ivs, func(i, j int) bool { return ivs[i].start.Before(ivs[j].start) })
	for i := range ivs {
		live := 0
		for j := range i {
			if ivs[j].end.After(ivs[i].start) {
				live++
				if ivs[j].slot == ivs[i].slot {
					t.Fatalf("SLOT OVERLAP: %+v and %+v", ivs[j], ivs[i])
				}
			}
		}
		if live >= 2 {
			t.Fatalf("THREE HOLDERS of a limit=2 semaphore at %v", ivs[i].start)
		}
		for j := range i { // a grant answered before another was asked for has the lower fence
			if ivs[j].start.Before(ivs[i].call) && ivs[i].fence <= ivs[j].fence {
				t.Fatalf("FENCE: %d granted after %d had been answered", ivs[i].fence, ivs[j].fence)
			}
		}
	}
	t.Logf("%d semaphore grants under faults: at most 2 at once, one per slot, fences grow", len(ivs))
}

// TestHostileSemaphoreSlotAboveLimit: Claim.Slot is not checked against
// Claim.Limit, here nor in the acquire script (`if not taken[want] then slot
// = want`): a holder asking for slot 3 of a full limit=2 semaphore is
// granted, a third holder.
func TestHostileSemaphoreSlotAboveLimit(t *testing.T) {
	servers := redistest.Start(t, 3)
	c := newCluster(t, servers, time.Second)
	ctx := context.Background()
	for _, h := range []string{"s1", "s2"} {
		if _, err := acquire(ctx, c, claimReq("k2", h, Claim{Limit: 2})); err != nil {
			t.Fatalf("%s: %v", h, err)
		}
	}
	if _, err := acquire(ctx, c, claimReq("k2", "s3", Claim{Limit: 2})); err == nil {
		t.Fatal("a third holder of a full limit=2 semaphore")
	}
	g, err := acquire(ctx, c, claimReq("k2", "s4", Claim{Limit: 2, Slot: 3}))
	if err == nil {
		who, _ := c.Who(ctx, "k2")
		t.Fatalf("slot 3 of a full limit=2 semaphore was granted (%+v): %d holders %+v", g, len(who), who)
	}
}
