package lockagent_test

import (
	"context"
	"errors"
	"testing"
	"time"

	lockagent "github.com/lock-agent/lock-agent/clients/go"
	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
)

// These run every coordination call against the real agent (run -dev);
// coordination_wire_test.go has the exact lines.

// next receives the next Leader from ch, failing after 10s.
func next(t *testing.T, ch <-chan lockagent.Leader) lockagent.Leader {
	t.Helper()
	select {
	case l, ok := <-ch:
		if !ok {
			t.Fatal("the observation ended")
		}
		return l
	case <-time.After(10 * time.Second):
		t.Fatal("no push within 10s")
	}
	return lockagent.Leader{}
}

// TestValuesOfAnyTextRoundTripThroughTheAgent: a value of any text (bytes
// that are not UTF-8 included) set by Value and by Proclaim reads back the
// same from WHO on another connection, and from an observer.
func TestValuesOfAnyTextRoundTripThroughTheAgent(t *testing.T) {
	holder, reader := dial(t, ""), dial(t, "")
	ctx := context.Background()
	values := []string{"plain", "host-1:8080", `{"addr": "10.0.0.1", "tags": ["a b"]}`, "50% off\n",
		"héllo ✓ 日本語 🦀", "\x00\xff\xfe", "* LEADER x none"}
	l, err := holder.Lock(ctx, "go/value", lockagent.Value(values[0]))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	obs, cancel := context.WithCancel(ctx)
	defer cancel()
	changes, err := reader.Observe(obs, "go/value")
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range values {
		if i > 0 {
			if err := l.Proclaim(ctx, v); err != nil {
				t.Fatal(err)
			}
		}
		// Proclaim returns once a majority has the value; WHO, which reads
		// any majority, may show the old one until the rest have it.
		var who []lockagent.Holder
		lockagenttest.Eventually(t, 5*time.Second, func() bool {
			who, err = reader.Who(ctx, "go/value")
			return err == nil && len(who) == 1 && who[0].Value == v
		}, "WHO after %q: %+v", v, &who)
		got := next(t, changes)
		for got.Value != v && got.Fence == l.Fence() { // an earlier value's push may come late, never a later one's
			got = next(t, changes)
		}
		if got.Value != v || got.Fence != l.Fence() {
			t.Fatalf("observed %+v, want value %q of fence %d", got, v, l.Fence())
		}
	}
}

// TestCampaignObserveAndResign: observers see the leader, its new value,
// nobody after it resigns, and the next candidate's greater term.
func TestCampaignObserveAndResign(t *testing.T) {
	first, second, observer := dial(t, ""), dial(t, ""), dial(t, "")
	ctx := context.Background()
	obs, cancel := context.WithCancel(ctx)
	defer cancel()
	changes, err := observer.Observe(obs, "go/election")
	if err != nil {
		t.Fatal(err)
	}
	if l := next(t, changes); !l.None || l.Name != "go/election" {
		t.Fatalf("before any campaign: %+v", l)
	}
	l1, err := first.Campaign(ctx, "go/election", "first:1")
	if err != nil {
		t.Fatal(err)
	}
	if l := next(t, changes); l.Fence != l1.Fence() || l.Value != "first:1" || l.Agent == "" {
		t.Fatalf("first term: %+v, want fence %d", l, l1.Fence())
	}
	elected := make(chan *lockagent.Lock, 1)
	go func() {
		l2, err := second.Campaign(ctx, "go/election", "second:2")
		if err != nil {
			t.Error(err)
		}
		elected <- l2
	}()
	if err := l1.Proclaim(ctx, "first:3"); err != nil {
		t.Fatal(err)
	}
	if l := next(t, changes); l.Fence != l1.Fence() || l.Value != "first:3" {
		t.Fatalf("after Proclaim: %+v", l)
	}
	if ld, err := second.Leader(ctx, "go/election"); err != nil || ld.Fence != l1.Fence() || ld.Value != "first:3" {
		t.Fatalf("Leader: %+v %v", ld, err)
	}
	if err := l1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l2 := <-elected
	if l2 == nil {
		t.FailNow()
	}
	defer l2.Unlock(ctx)
	l := next(t, changes)
	if l.None { // the moment between the two terms may be seen, or not
		l = next(t, changes)
	}
	if l.Fence != l2.Fence() || l2.Fence() <= l1.Fence() || l.Value != "second:2" {
		t.Fatalf("second term: %+v, want fence %d > %d", l, l2.Fence(), l1.Fence())
	}
	if err := l1.Proclaim(ctx, "late"); !errors.Is(err, lockagent.ErrNotHeld) {
		t.Fatalf("Proclaim after Unlock: %v, want ErrNotHeld", err)
	}
	cancel()
	for range changes { // closes once ctx ended
	}
}

func TestCheckAgainstTheAgent(t *testing.T) {
	c := dial(t, "")
	ctx := context.Background()
	l, err := c.Lock(ctx, "go/check")
	if err != nil {
		t.Fatal(err)
	}
	fence := l.Fence()
	if ok, err := c.Check(ctx, "go/check", fence); !ok || err != nil {
		t.Fatalf("Check of the current fence: %v %v", ok, err)
	}
	if ok, err := c.Check(ctx, "go/check", fence+1); ok || err != nil {
		t.Fatalf("Check of another fence: %v %v", ok, err)
	}
	l.Unlock(ctx)
	if ok, err := c.Check(ctx, "go/check", fence); ok || err != nil {
		t.Fatalf("Check after Unlock: %v %v", ok, err)
	}
}

// TestWantedFromAWaiter: a NotifyWanted holder hears of a conflicting
// waiter on another connection, and WHO lists that waiter apart from the
// holders.
func TestWantedFromAWaiter(t *testing.T) {
	holder, waiter := dial(t, ""), dial(t, "")
	ctx := context.Background()
	l, err := holder.Lock(ctx, "go/wanted", lockagent.NotifyWanted(), lockagent.Shared())
	if err != nil {
		t.Fatal(err)
	}
	reader, err := waiter.Lock(ctx, "go/wanted", lockagent.Shared())
	if err != nil {
		t.Fatal(err)
	}
	reader.Unlock(ctx)
	waitCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go waiter.Lock(waitCtx, "go/wanted")
	select {
	case <-l.Wanted():
	case <-time.After(10 * time.Second):
		t.Fatal("no Wanted within 10s of a conflicting waiter")
	}
	// WHO's line about the waiter is not a holder.
	var o lockagent.Occupancy
	lockagenttest.Eventually(t, 5*time.Second, func() bool {
		o, err = holder.Occupancy(ctx, "go/wanted")
		return err == nil && len(o.Waiting) == 1 && o.Waiting[0].Count == 1 && !o.Waiting[0].Since.IsZero()
	}, "WHO shows no waiter: %+v", &o)
	if len(o.Holders) != 1 || o.Holders[0].Fence != l.Fence() {
		t.Fatalf("holders %+v, want the one", o.Holders)
	}
	l.Unlock(ctx)
}

// TestDelayAfterAnUncleanEnd: a hold with Delay whose connection closes
// leaves its name unavailable, with WHO's DelayedUntil, until the delay
// ends; a clean Unlock leaves none.
func TestDelayAfterAnUncleanEnd(t *testing.T) {
	holder, other := dial(t, ""), dial(t, "")
	ctx := context.Background()
	l, err := holder.Lock(ctx, "go/delay", lockagent.Delay(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	l.Unlock(ctx)
	if l, err := other.Lock(ctx, "go/delay", lockagent.Wait(0)); err != nil {
		t.Fatalf("after a clean Unlock: %v", err)
	} else {
		l.Unlock(ctx)
	}
	if _, err := holder.Lock(ctx, "go/delay", lockagent.Delay(time.Second)); err != nil {
		t.Fatal(err)
	}
	holder.Close()
	var o lockagent.Occupancy
	lockagenttest.Eventually(t, 5*time.Second, func() bool {
		o, err = other.Occupancy(ctx, "go/delay")
		return err == nil && len(o.Holders) == 0 && !o.DelayedUntil.IsZero()
	}, "no delay shown after the holder's connection closed: %+v", &o)
	switch l, err := other.Lock(ctx, "go/delay", lockagent.Wait(0)); {
	case err == nil: // only right for a loaded host that got here after the delay
		if time.Now().Before(o.DelayedUntil.Add(-100 * time.Millisecond)) {
			t.Fatalf("granted during the delay, which ends %v", o.DelayedUntil)
		}
		l.Unlock(ctx)
	case !errors.Is(err, lockagent.ErrBusy):
		t.Fatalf("during the delay: %v, want ErrBusy", err)
	}
	l, err = other.Lock(ctx, "go/delay", lockagent.Wait(10*time.Second))
	if err != nil {
		t.Fatalf("after the delay: %v", err)
	}
	if time.Now().Before(o.DelayedUntil.Add(-5 * time.Millisecond)) {
		t.Fatalf("granted before the delay's end %v", o.DelayedUntil)
	}
	l.Unlock(ctx)
}

// TestMinHold: an Unlock before MinHold leaves the name held by nobody
// until MinHold after the grant.
func TestMinHold(t *testing.T) {
	holder, other := dial(t, ""), dial(t, "")
	ctx := context.Background()
	start := time.Now()
	l, err := holder.Lock(ctx, "go/minhold", lockagent.MinHold(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	switch l, err := other.Lock(ctx, "go/minhold", lockagent.Wait(0)); {
	case err == nil: // only right for a loaded host that got here after a second
		if took := time.Since(start); took < time.Second {
			t.Fatalf("granted %v after the first grant, before its MinHold of 1s", took)
		}
		l.Unlock(ctx)
	case !errors.Is(err, lockagent.ErrBusy):
		t.Fatalf("before MinHold: %v, want ErrBusy", err)
	}
	l, err = other.Lock(ctx, "go/minhold", lockagent.Wait(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < time.Second {
		t.Fatalf("granted again %v after the first grant, before its MinHold of 1s", took)
	}
	l.Unlock(ctx)
}

// TestRevoke: root may revoke without an acl block (the tests' agent has
// none); the holder's lock is lost with reason revoked.
func TestRevoke(t *testing.T) {
	holder, operator := dial(t, ""), dial(t, "")
	ctx := context.Background()
	l, err := holder.Lock(ctx, "go/revoke")
	if err != nil {
		t.Fatal(err)
	}
	n, err := operator.Revoke(ctx, "go/revoke", lockagent.RevokeOptions{})
	if errors.Is(err, lockagent.ErrDenied) {
		t.Skipf("not root: %v", err)
	}
	if err != nil || n != 1 {
		t.Fatalf("Revoke: %d %v", n, err)
	}
	<-l.Done()
	var lost *lockagent.LostError
	if !errors.As(l.Err(), &lost) || lost.Reason != "revoked" {
		t.Fatalf("Err = %v, want lost: revoked", l.Err())
	}
	if n, err := operator.Revoke(ctx, "go/revoke", lockagent.RevokeOptions{}); err != nil || n != 0 {
		t.Fatalf("Revoke of nothing: %d %v", n, err)
	}
	// A reason word reaches the holder as Why.
	l, err = holder.Lock(ctx, "go/revoke")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := operator.Revoke(ctx, "go/revoke", lockagent.RevokeOptions{Reason: "maintenance"}); err != nil || n != 1 {
		t.Fatalf("Revoke with a reason: %d %v", n, err)
	}
	<-l.Done()
	if !errors.As(l.Err(), &lost) || lost.Reason != "revoked" || lost.Why != "maintenance" {
		t.Fatalf("Err = %v, want lost: revoked (maintenance)", l.Err())
	}
}
