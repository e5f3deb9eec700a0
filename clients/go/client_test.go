package lockagent_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	lockagent "github.com/lock-agent/lock-agent/clients/go"
)

func dial(t *testing.T, path string) *lockagent.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := lockagent.Dial(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestFiftyGoroutinesOnOneClientKeepMutualExclusion(t *testing.T) {
	c := dial(t, "")
	ctx := context.Background()
	var inside, grants atomic.Int32
	var last atomic.Int64
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				l, err := c.Lock(ctx, "go/fifty", lockagent.Wait(30*time.Second))
				if err != nil {
					t.Error(err)
					return
				}
				if n := inside.Add(1); n != 1 {
					t.Errorf("%d goroutines inside the lock", n)
				}
				if f := l.Fence(); f <= last.Load() {
					t.Errorf("fence %d after %d", f, last.Load())
				} else {
					last.Store(f)
				}
				grants.Add(1)
				inside.Add(-1)
				if err := l.Unlock(ctx); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if grants.Load() != 250 {
		t.Fatalf("%d grants", grants.Load())
	}
}

func TestCancellingTheContextWhileWaitingLeavesNothingHeld(t *testing.T) {
	holder := dial(t, "")
	c := dial(t, "")
	ctx := context.Background()
	l, err := holder.Lock(ctx, "go/cancel")
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := c.Lock(wctx, "go/cancel"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	// Now let the grant race the cancellation: release just as we give up.
	for range 20 {
		wctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		go func(held *lockagent.Lock) {
			time.Sleep(19 * time.Millisecond)
			held.Unlock(ctx)
		}(l)
		if won, err := c.Lock(wctx, "go/cancel"); err == nil {
			won.Unlock(ctx) // granted before the context ended: ours to release
		} else if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatal(err)
		}
		cancel()
		if l, err = holder.Lock(ctx, "go/cancel", lockagent.Wait(5*time.Second)); err != nil {
			t.Fatalf("a cancelled wait left the lock held: %v", err)
		}
	}
	if holds, err := c.Holds(ctx); err != nil || len(holds) != 0 {
		t.Fatalf("holds after cancellations: %+v %v", holds, err)
	}
}

func TestTypedErrors(t *testing.T) {
	c := dial(t, "")
	ctx := context.Background()
	l, err := c.Lock(ctx, "go/typed")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Lock(ctx, "go/typed", lockagent.Wait(0)); !errors.Is(err, lockagent.ErrBusy) {
		t.Fatalf("second owner: %v", err)
	}
	if _, err := c.Lock(ctx, "bad name{}"); !errors.Is(err, lockagent.ErrBadName) && !errors.Is(err, lockagent.ErrBadRequest) {
		t.Fatalf("bad name: %v", err)
	}
	var e *lockagent.ArgError
	if _, err := c.Lock(ctx, "go/{x}"); !errors.As(err, &e) || e.Arg != "name" || !errors.Is(err, lockagent.ErrBadName) {
		t.Fatalf("bad name: %v", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); !errors.Is(err, lockagent.ErrNotHeld) {
		t.Fatalf("double unlock: %v", err)
	}
	select {
	case <-l.Done():
	default:
		t.Fatal("Done not closed after Unlock")
	}
}

func TestOwnerReentersAndTTLExpires(t *testing.T) {
	c := dial(t, "")
	ctx := context.Background()
	a, err := c.Lock(ctx, "go/owner", lockagent.Owner("me"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Lock(ctx, "go/owner", lockagent.Owner("me"), lockagent.Wait(0))
	if err != nil || b.Count() != 2 || b.Fence() != a.Fence() {
		t.Fatalf("re-entry: %v count=%d", err, b.Count())
	}
	b.Unlock(ctx)
	a.Unlock(ctx)

	l, err := c.Lock(ctx, "go/ttl", lockagent.TTL(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("ttl lock never ended")
	}
	var lost *lockagent.LostError
	if !errors.As(l.Err(), &lost) || lost.Reason != "expired" || !errors.Is(l.Err(), lockagent.ErrLost) {
		t.Fatalf("err = %v", l.Err())
	}
	if context.Cause(l.Context()) != l.Err() {
		t.Fatal("Context not cancelled with the loss")
	}
}

func TestKilledAgentEndsEveryLock(t *testing.T) {
	cmd, sock := ownAgent(t)
	c := dial(t, sock)
	ctx := context.Background()
	var locks []*lockagent.Lock
	for _, n := range []string{"k1", "k2", "k3"} {
		l, err := c.Lock(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		locks = append(locks, l)
	}
	cmd.Process.Kill()
	for _, l := range locks {
		select {
		case <-l.Done():
		case <-time.After(2 * time.Second):
			t.Fatalf("%s: Done not closed after the agent died", l.Name())
		}
		if !errors.Is(l.Err(), lockagent.ErrLost) || !errors.Is(l.Err(), lockagent.ErrClosed) {
			t.Fatalf("err = %v", l.Err())
		}
	}
	if _, err := c.Lock(ctx, "k4"); !errors.Is(err, lockagent.ErrClosed) {
		t.Fatalf("lock after the agent died: %v", err)
	}
	if err := c.Ping(ctx); !errors.Is(err, lockagent.ErrClosed) {
		t.Fatalf("ping after the agent died: %v", err)
	}
}

func TestStatusAndWho(t *testing.T) {
	c := dial(t, "")
	ctx := context.Background()
	l, err := c.Lock(ctx, "go/who")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	s, err := c.Status(ctx)
	if err != nil || len(s.Masters) != 3 || s.Quorum != 2 || s.Holds < 1 {
		t.Fatalf("status %+v %v", s, err)
	}
	who, err := c.Who(ctx, "go/who")
	if err != nil || len(who) != 1 || who[0].Fence != l.Fence() || who[0].Owner != l.Owner() {
		t.Fatalf("who %+v %v", who, err)
	}
	// No one waits: the agent leaves queued= out (-1); an older one never
	// sends it.
	o, err := c.Occupancy(ctx, "go/who")
	if err != nil || len(o.Holders) != 1 || o.Holders[0].Fence != l.Fence() || o.Queued > 0 || o.Queued < -1 {
		t.Fatalf("occupancy %+v %v", o, err)
	}
}

// TestWhoAndHoldsShowSemaphoreSlots: Who's and Holds' records of a
// semaphore hold carry its limit and slot; a plain lock's carry zeros.
func TestWhoAndHoldsShowSemaphoreSlots(t *testing.T) {
	c := dial(t, "")
	ctx := context.Background()
	mine := map[int]*lockagent.Lock{} // slot -> lock
	for range 2 {
		l, err := c.Lock(ctx, "go/slots", lockagent.Limit(3))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Unlock(ctx)
		mine[l.Slot()] = l
	}
	plain, err := c.Lock(ctx, "go/noslots")
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Unlock(ctx)

	who, err := c.Who(ctx, "go/slots")
	if err != nil || len(who) != 2 {
		t.Fatalf("who %+v %v", who, err)
	}
	for _, h := range who {
		if l := mine[h.Slot]; l == nil || h.Limit != 3 || h.Owner != l.Owner() || h.Fence != l.Fence() {
			t.Fatalf("who %+v, want limit 3 and the slots of %v", who, mine)
		}
	}
	if who, err := c.Who(ctx, "go/noslots"); err != nil || len(who) != 1 || who[0].Limit != 0 || who[0].Slot != 0 {
		t.Fatalf("who of a lock %+v %v, want limit 0 slot 0", who, err)
	}

	holds, err := c.Holds(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, h := range holds {
		switch h.Name {
		case "go/slots":
			if l := mine[h.Slot]; l == nil || h.Limit != 3 || h.Owner != l.Owner() {
				t.Fatalf("holds %+v, want limit 3 and the slots of %v", holds, mine)
			}
			seen++
		case "go/noslots":
			if h.Limit != 0 || h.Slot != 0 {
				t.Fatalf("holds of a lock %+v, want limit 0 slot 0", h)
			}
			seen++
		}
	}
	if seen != 3 {
		t.Fatalf("holds %+v, want both slots and the lock", holds)
	}
}

func TestSharedAndSemaphoreLocks(t *testing.T) {
	c := dial(t, "")
	ctx := context.Background()
	r1, err := c.Lock(ctx, "go/rw", lockagent.Shared())
	if err != nil {
		t.Fatal(err)
	}
	r2, err := c.Lock(ctx, "go/rw", lockagent.Shared())
	if err != nil {
		t.Fatalf("a second reader: %v", err)
	}
	if _, err := c.Lock(ctx, "go/rw", lockagent.Wait(0)); !errors.Is(err, lockagent.ErrBusy) {
		t.Fatalf("a writer while readers hold: %v", err)
	}
	r1.Unlock(ctx)
	r2.Unlock(ctx)

	slots := map[int]bool{}
	for range 2 {
		l, err := c.Lock(ctx, "go/sem", lockagent.Limit(2))
		if err != nil || l.Slot() < 1 || l.Slot() > 2 || slots[l.Slot()] {
			t.Fatalf("semaphore: slot %d, %v (slots so far %v)", l.Slot(), err, slots)
		}
		slots[l.Slot()] = true
	}
	if _, err := c.Lock(ctx, "go/sem", lockagent.Limit(2), lockagent.Wait(0)); !errors.Is(err, lockagent.ErrBusy) {
		t.Fatalf("a third holder of limit=2: %v", err)
	}
	if _, err := c.Lock(ctx, "go/sem", lockagent.Limit(3)); !errors.Is(err, lockagent.ErrConflict) {
		t.Fatalf("another limit: %v", err)
	}
}

func TestLockAll(t *testing.T) {
	c := dial(t, "")
	ctx := context.Background()
	ls, err := c.LockAll(ctx, []string{"go/m2", "go/m1"})
	if err != nil || len(ls) != 2 || ls[0].Name() != "go/m2" || ls[0].Fence() == 0 || ls[1].Fence() == 0 {
		t.Fatalf("LockAll: %v %v", ls, err)
	}
	other, err := c.Lock(ctx, "go/m3")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.LockAll(ctx, []string{"go/m4", "go/m3"}, lockagent.Wait(0)); !errors.Is(err, lockagent.ErrBusy) {
		t.Fatalf("LockAll with one name held: %v", err)
	}
	if l, err := c.Lock(ctx, "go/m4", lockagent.Wait(0)); err != nil {
		t.Fatalf("a failed LockAll left go/m4 held: %v", err)
	} else {
		l.Unlock(ctx)
	}
	for _, l := range append(ls, other) {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
