package locks

import (
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/lock-agent/lock-agent/quorum/clock"
	"github.com/lock-agent/lock-agent/renewal"
)

// TestALostHoldsReleaseIsCountedOnce: a lost hold is counted in its name's
// lostRelease once, however many paths end it (the watchdog's lose and the
// session's LostNow may both), and lostReleased lets the name's LOCKs go
// only once every lost hold of the name was released, however many times
// each is reported released; then the name's record is retired.
func TestALostHoldsReleaseIsCountedOnce(t *testing.T) {
	clk := clock.NewFake(time.Unix(1700000000, 0))
	a := New(Config{AgentID: "t", Lease: time.Second, CacheLinger: time.Second}, hclog.NewNullLogger(), clk, nil, "i")
	a.Attach(nil, renewal.New(renewal.Config{Lease: time.Second, Masters: 3, Clock: clk, OnLost: func(*renewal.Hold, renewal.Loss) {}}), nil)
	one := &Hold{rh: &renewal.Hold{Name: "x", Holder: "h1"}}
	two := &Hold{rh: &renewal.Hold{Name: "x", Holder: "h2"}}
	released := func() <-chan struct{} {
		a.mu.Lock()
		defer a.mu.Unlock()
		if n := a.names["x"]; n != nil && n.lostRelease != nil {
			return n.lostRelease.released
		}
		return nil
	}
	a.mu.Lock()
	a.releasingLostLocked(one)
	a.releasingLostLocked(one) // lose and LostNow both ended it
	a.releasingLostLocked(two)
	a.mu.Unlock()
	ch := released()
	if ch == nil {
		t.Fatal("no release awaited after two holds of x were lost")
	}
	a.lostReleased(one)
	a.lostReleased(one) // the session's release and releaseAt's both
	select {
	case <-ch:
		t.Fatal("the LOCKs of x went on while the second lost hold was still to be released")
	default:
	}
	a.lostReleased(&Hold{rh: &renewal.Hold{Name: "x", Holder: "h3"}}) // never lost: nothing
	if released() != ch {
		t.Fatal("a hold that was not lost ended the wait")
	}
	a.lostReleased(two)
	select {
	case <-ch:
	default:
		t.Fatal("the LOCKs of x still wait after every lost hold was released")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if n := a.names["x"]; n != nil {
		t.Fatalf("x's record was kept after its lost holds were released: %+v", n)
	}
}
