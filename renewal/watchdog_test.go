package renewal

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lock-agent/lock-agent/quorum/rules"

	"github.com/lock-agent/lock-agent/quorum"
	"github.com/lock-agent/lock-agent/quorum/clock"
)

// scriptedRenewer answers every renewal with what the test last set, and
// counts rounds and keys. It stands in for the masters only where they cannot
// fail on cue; the agent's fault tests renew against real redis-servers.
type scriptedRenewer struct {
	mu     sync.Mutex
	answer quorum.RenewResult
	rounds int
	keys   int
	last   []quorum.RenewKey // the last round's
}

func (s *scriptedRenewer) Renew(_ context.Context, _ time.Duration, keys []quorum.RenewKey) []quorum.RenewResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rounds++
	s.keys += len(keys)
	s.last = append([]quorum.RenewKey(nil), keys...)
	out := make([]quorum.RenewResult, len(keys))
	for i := range out {
		out[i] = s.answer
	}
	return out
}

func (s *scriptedRenewer) set(r quorum.RenewResult) {
	s.mu.Lock()
	s.answer = r
	s.mu.Unlock()
}

type lostEvent struct {
	hold *Hold
	loss Loss
	at   time.Time
}

type harness struct {
	t       *testing.T
	clock   *clock.Fake
	renewer *scriptedRenewer
	w       *Watchdog
	lost    chan lostEvent
}

const lease = 3 * time.Second

func newHarness(t *testing.T) *harness {
	return newHarnessWith(t, nil)
}

// newHarnessWith is newHarness with renewer as the masters, or the
// harness's scripted renewer if it is nil.
func newHarnessWith(t *testing.T, renewer Renewer) *harness {
	return newHarnessWithClock(t, renewer, clock.NewFake(time.Unix(1000, 0)))
}

// newHarnessWithClock is newHarnessWith on fake, a clock the renewer may
// take its time on too.
func newHarnessWithClock(t *testing.T, renewer Renewer, fake *clock.Fake) *harness {
	h := &harness{t: t, clock: fake, renewer: &scriptedRenewer{answer: quorum.RenewResult{OK: 3}},
		lost: make(chan lostEvent, 100)}
	if renewer == nil {
		renewer = h.renewer
	}
	h.w = New(Config{Lease: lease, DriftFactor: 0.01, Masters: 3, Renewer: renewer, Clock: h.clock,
		OnLost: func(hold *Hold, loss Loss) {
			// OnLost must never block (see Config.OnLost): a test that
			// loses more than the channel holds has failed already.
			select {
			case h.lost <- lostEvent{hold, loss, h.clock.Now()}:
			default:
			}
		}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		h.w.Run(ctx)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	h.settle()
	return h
}

// settle waits until the watchdog has handled everything the clock fired:
// every goroutine of the test's bubble (the watchdog's, its renewals') is
// blocked again, waiting for the fake clock or a channel. (It waited for 5ms
// without a timer armed: on a loaded host the watchdog had not run by then,
// the clock moved on past the holds' validity, and they were lost.)
func (h *harness) settle() {
	synctest.Wait()
}

// run advances the fake clock by total in 100ms steps, letting the watchdog work.
func (h *harness) run(total time.Duration) { h.runBy(100*time.Millisecond, total) }

// runBy advances the fake clock by total in steps of step: events are seen
// at the end of the step they fall in.
func (h *harness) runBy(step, total time.Duration) {
	for ; total > 0; total -= step {
		h.clock.Advance(min(step, total))
		h.settle()
	}
}

func (h *harness) add(name string, fixed bool, valid time.Duration) *Hold {
	hold := &Hold{Name: name, Holder: "x"}
	if fixed {
		hold.Kind, hold.Lease = KindFixed, valid
	}
	h.w.Add(hold, h.clock.Now().Add(valid))
	h.settle()
	return hold
}

func (h *harness) expectNoLoss() {
	h.t.Helper()
	select {
	case e := <-h.lost:
		h.t.Fatalf("%s lost (%+v) at %v", e.hold.Name, e.loss, e.at)
	default:
	}
}

// expectLoss expects hold lost for reason, with no word of an operator's
// (the watchdog never has one), by notAfter.
func (h *harness) expectLoss(hold *Hold, reason Reason, notAfter time.Time) {
	h.t.Helper()
	select {
	case e := <-h.lost:
		if e.hold != hold || e.loss != (Loss{Reason: reason}) || e.at.After(notAfter) {
			h.t.Fatalf("lost %s (%+v) at %v; want %s (%s) by %v", e.hold.Name, e.loss, e.at, hold.Name, reason, notAfter)
		}
	default:
		h.t.Fatalf("%s was not lost", hold.Name)
	}
}

func TestRenewedHoldLivesOnFarPastItsLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		hold := h.add("a", false, rules.Validity(lease, 0, 0.01))
		h.run(5 * lease)
		h.expectNoLoss()
		if v, ok := h.w.Validity(hold); !ok || v < lease/2 {
			t.Fatalf("validity %v %v", v, ok)
		}
	})
}

func TestRenewalsCarryTheRecordSetLast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		hold := h.add("a", false, rules.Validity(lease, 0, 0.01))
		next := quorum.Record{Fence: 42, Top: 50, Who: quorum.Who{Owner: "next"}}
		if !h.w.SetRecord(hold, next) {
			t.Fatal("SetRecord of a watched hold failed")
		}
		h.run(lease / 2)
		h.renewer.mu.Lock()
		last := h.renewer.last
		h.renewer.mu.Unlock()
		if len(last) != 1 || last[0].Record != next {
			t.Fatalf("renewed with %+v, want the record %+v", last, next)
		}
		h.w.Remove(hold)
		if h.w.SetRecord(hold, next) {
			t.Fatal("SetRecord of a removed hold succeeded")
		}
	})
}

// TestEachKindIsRenewedAsWhatItIsARecordOf: a hold's Kind (and a hold's
// Tail) reaches the masters as the renewal key's flags, and a fixed hold is
// not renewed at all.
func TestEachKindIsRenewedAsWhatItIsARecordOf(t *testing.T) {
	for _, c := range []struct {
		name    string
		hold    Hold
		renewed bool
		want    quorum.RenewKey
	}{
		{"a client's hold is renewed as a hold", Hold{Kind: KindHold}, true, quorum.RenewKey{}},
		{"a hold with a tail is renewed keeping its tail", Hold{Kind: KindHold, Tail: true}, true, quorum.RenewKey{Tail: true}},
		{"a queue entry is renewed as its heartbeat", Hold{Kind: KindEntry}, true, quorum.RenewKey{Entry: true}},
		{"a waiting record is renewed as one", Hold{Kind: KindWaiting}, true, quorum.RenewKey{Waiting: true}},
		{"a fixed hold is never renewed", Hold{Kind: KindFixed}, false, quorum.RenewKey{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t)
				hold := c.hold
				hold.Name, hold.Holder = "k", "x"
				h.w.Add(&hold, h.clock.Now().Add(rules.Validity(lease, 0, 0.01)))
				h.run(h.w.Interval())
				h.renewer.mu.Lock()
				defer h.renewer.mu.Unlock()
				if !c.renewed {
					if h.renewer.keys != 0 {
						t.Fatalf("renewed %d times", h.renewer.keys)
					}
					return
				}
				want := c.want
				want.Name, want.Holder, want.Lease = "k", "x", lease
				if len(h.renewer.last) != 1 || h.renewer.last[0] != want {
					t.Fatalf("renewed with %+v, want %+v", h.renewer.last, want)
				}
			})
		})
	}
}

func TestHoldIsLostAtItsDeadlineWhenRenewalsMissQuorum(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		h.renewer.set(quorum.RenewResult{OK: 1})
		valid := rules.Validity(lease, 0, 0.01)
		start := h.clock.Now()
		hold := h.add("a", false, valid)
		lead := h.w.lead(hold)
		h.run(valid - lead - 100*time.Millisecond)
		h.expectNoLoss()
		h.runBy(5*time.Millisecond, 200*time.Millisecond)
		h.expectLoss(hold, ReasonQuorum, start.Add(valid-lead))
		if _, ok := h.w.Validity(hold); ok || h.w.Remove(hold) {
			t.Fatal("a lost hold must be gone from the watchdog")
		}
	})
}

func TestRecoveringRenewalSavesTheHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		h.renewer.set(quorum.RenewResult{OK: 1})
		hold := h.add("a", false, rules.Validity(lease, 0, 0.01))
		h.run(lease / 2) // one round missed quorum
		h.renewer.set(quorum.RenewResult{OK: 2})
		h.run(3 * lease)
		h.expectNoLoss()
		if _, ok := h.w.Validity(hold); !ok {
			t.Fatal("hold gone")
		}
	})
}

func TestFixedHoldIsNeverRenewedAndExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		start := h.clock.Now()
		hold := h.add("t", true, time.Second)
		h.run(800 * time.Millisecond)
		h.runBy(5*time.Millisecond, 400*time.Millisecond)
		h.expectLoss(hold, ReasonExpired, start.Add(time.Second-h.w.lead(hold)))
		if h.renewer.keys != 0 {
			t.Fatalf("a ttl hold was renewed %d times", h.renewer.keys)
		}
	})
}

func TestHoldGoneOnAMajorityIsRevoked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		h.renewer.set(quorum.RenewResult{OK: 1, Gone: 2})
		hold := h.add("a", false, rules.Validity(lease, 0, 0.01))
		h.run(lease / 2)
		h.expectLoss(hold, ReasonRevoked, h.clock.Now())
	})
}

func TestRemovedHoldIsNotReported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		h.renewer.set(quorum.RenewResult{})
		hold := h.add("a", false, time.Second)
		if !h.w.Remove(hold) {
			t.Fatal("remove of a watched hold must report true")
		}
		h.run(2 * lease)
		h.expectNoLoss()
	})
}

func TestOneRoundRenewsEveryHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		for range 500 {
			h.w.Add(&Hold{Name: "n", Holder: "x"}, h.clock.Now().Add(rules.Validity(lease, 0, 0.01)))
		}
		h.run(h.w.Interval())
		h.renewer.mu.Lock()
		defer h.renewer.mu.Unlock()
		if h.renewer.rounds != 1 || h.renewer.keys != 500 {
			t.Fatalf("rounds=%d keys=%d, want 1 round of 500", h.renewer.rounds, h.renewer.keys)
		}
	})
}

// TestManyTTLHoldsEndEachAtItsOwnTime adds, removes and moves the end of
// many ttl= holds in random order: each is lost, expired, in the clock step
// its End falls in, never before, and removed ones never.
func TestManyTTLHoldsEndEachAtItsOwnTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		h.lost = make(chan lostEvent, 1000)
		rng := rand.New(rand.NewPCG(5, 6))
		start := h.clock.Now()
		end := map[*Hold]time.Time{}
		var holds []*Hold
		for i := range 300 {
			hold := &Hold{Name: fmt.Sprintf("n%d", i), Holder: "x", End: start.Add(time.Duration(100+rng.IntN(2900)) * time.Millisecond)}
			h.w.Add(hold, start.Add(rules.Validity(lease, 0, 0.01)))
			holds = append(holds, hold)
			end[hold] = hold.End
		}
		for _, hold := range holds[:50] { // removed: never reported
			h.w.Remove(hold)
			delete(end, hold)
		}
		for _, hold := range holds[50:100] { // moved: reported at the new end
			end[hold] = start.Add(time.Duration(3000+rng.IntN(1000)) * time.Millisecond)
			h.w.SetEnd(hold, end[hold])
		}
		h.settle()
		const step = 50 * time.Millisecond
		for elapsed := time.Duration(0); elapsed < 5*time.Second; elapsed += step {
			h.clock.Advance(step)
			h.settle()
			now := h.clock.Now()
			for {
				select {
				case e := <-h.lost:
					want, ok := end[e.hold]
					if !ok || e.loss != (Loss{Reason: ReasonExpired}) || e.at.Before(want) || e.at.Sub(want) >= step {
						t.Fatalf("%s lost (%+v) at %v, want expired in the step of %v (watched %v)", e.hold.Name, e.loss, e.at.Sub(start), want.Sub(start), ok)
					}
					delete(end, e.hold)
					continue
				default:
				}
				break
			}
			for hold, at := range end {
				if !at.After(now) {
					t.Fatalf("%s not lost by %v (its end %v)", hold.Name, now.Sub(start), at.Sub(start))
				}
			}
		}
		if len(end) != 0 {
			t.Fatalf("%d holds never lost", len(end))
		}
	})
}

// roundRecorder renews every hold, records the size of each Renew call and
// the names it renewed, sends each call's size on calls, and runs hook
// before its first call.
type roundRecorder struct {
	mu      sync.Mutex
	renewed map[string]int
	hook    func()
	calls   chan int
}

func (r *roundRecorder) Renew(_ context.Context, _ time.Duration, keys []quorum.RenewKey) []quorum.RenewResult {
	r.mu.Lock()
	hook := r.hook
	r.hook = nil
	r.mu.Unlock()
	if hook != nil {
		hook()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]quorum.RenewResult, len(keys))
	for i, k := range keys {
		r.renewed[k.Name]++
		out[i] = quorum.RenewResult{OK: 3}
	}
	r.calls <- len(keys)
	return out
}

func TestManyHoldsAreRenewedInRoundsOfBoundedSize(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &roundRecorder{renewed: map[string]int{}, calls: make(chan int, 100)}
		h := newHarnessWith(t, rec)
		holds := make([]*Hold, 2*roundSize+1)
		for i := range holds {
			holds[i] = &Hold{Name: fmt.Sprint("h", i), Holder: "x"}
			h.w.Add(holds[i], h.clock.Now().Add(rules.Validity(lease, 0, 0.01)))
		}
		h.settle()
		// Removed while the first round is under way: its own round, later,
		// must not renew it (its release may be under way).
		removed := holds[len(holds)-1]
		rec.hook = func() { h.w.Remove(removed) }
		h.clock.Advance(lease / 3)
		for range 2 {
			if n := <-rec.calls; n != roundSize {
				t.Fatalf("a Renew call of %d holds, want %d", n, roundSize)
			}
		}
		rec.mu.Lock()
		for _, hold := range holds[:len(holds)-1] {
			if n := rec.renewed[hold.Name]; n != 1 {
				t.Errorf("%s renewed %d times in one renewal", hold.Name, n)
			}
		}
		rec.mu.Unlock()
		h.run(5 * lease)
		h.expectNoLoss()
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if n := rec.renewed[removed.Name]; n != 0 {
			t.Errorf("a hold removed during a renewal was renewed %d times", n)
		}
	})
}

// TestLostSaysWhyAHoldStoppedBeingWatched: from the moment the watchdog
// drops a hold as lost or revoked, Lost says so and why (the agent acts on
// it before OnLost reaches it); a removed, a watched or a re-added hold is
// not lost.
func TestLostSaysWhyAHoldStoppedBeingWatched(t *testing.T) {
	valid := rules.Validity(lease, 0, 0.01)
	cases := []struct {
		name string
		do   func(h *harness, hold *Hold)
		loss Loss
		ok   bool
	}{
		{"watched", func(h *harness, hold *Hold) {}, Loss{}, false},
		{"removed", func(h *harness, hold *Hold) { h.w.Remove(hold) }, Loss{}, false},
		{"renewals missed quorum", func(h *harness, hold *Hold) {
			h.renewer.set(quorum.RenewResult{OK: 1})
			h.run(lease)
		}, Loss{Reason: ReasonQuorum}, true},
		{"gone on a majority", func(h *harness, hold *Hold) {
			h.renewer.set(quorum.RenewResult{OK: 1, Gone: 2})
			h.run(lease / 2)
		}, Loss{Reason: ReasonRevoked}, true},
		{"revoked by an operator", func(h *harness, hold *Hold) { h.w.Revoke(hold, "maintenance") }, Loss{Reason: ReasonRevoked, Why: "maintenance"}, true},
		{"revoked with no word", func(h *harness, hold *Hold) { h.w.Revoke(hold, "") }, Loss{Reason: ReasonRevoked}, true},
		{"revoked with the word revoked", func(h *harness, hold *Hold) { h.w.Revoke(hold, "revoked") }, Loss{Reason: ReasonRevoked}, true},
		{"revoked with another reason's word", func(h *harness, hold *Hold) { h.w.Revoke(hold, "expired") }, Loss{Reason: ReasonRevoked, Why: "expired"}, true},
		{"revoked, then added again", func(h *harness, hold *Hold) {
			h.w.Revoke(hold, "maintenance")
			h.w.Add(hold, h.clock.Now().Add(valid))
		}, Loss{}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t)
				hold := h.add("a", false, valid)
				c.do(h, hold)
				loss, ok := h.w.Lost(hold)
				if loss != c.loss || ok != c.ok {
					t.Fatalf("Lost = %+v, %v; want %+v, %v", loss, ok, c.loss, c.ok)
				}
			})
		})
	}
}

// partialRenewer renews only the first part of every Renew call's holds,
// as a round whose budget ended before its last answers came: the rest
// are answered as missing their quorum.
type partialRenewer struct{ part float64 }

func (p partialRenewer) Renew(_ context.Context, _ time.Duration, keys []quorum.RenewKey) []quorum.RenewResult {
	out := make([]quorum.RenewResult, len(keys))
	for i := range out {
		if float64(i) < p.part*float64(len(keys)) {
			out[i] = quorum.RenewResult{OK: 3}
		}
	}
	return out
}

// TestRoundsCutShortStillRenewEveryHold: when each round renews only 60%
// of the holds before its budget ends, the holds it missed go first in the
// next round, so each is renewed at least every other round (two of them
// fit in a lease) and none is lost. In a fixed order the same holds came
// last every round and were lost (a cluster master's renewal of 2,000
// names on a host with two CPU hogs: TestBreaker20ClusterManyNamesManySlots).
func TestRoundsCutShortStillRenewEveryHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarnessWith(t, partialRenewer{part: 0.6})
		for i := range 100 {
			h.w.Add(&Hold{Name: fmt.Sprint("h", i), Holder: "x"}, h.clock.Now().Add(rules.Validity(lease, 0, 0.01)))
		}
		h.settle()
		h.run(5 * lease)
		h.expectNoLoss()
	})
}

// stalledRenewer renews every hold of its first rounds calls, then holds
// every later call until release is closed, as a master that stalls in the
// middle of a renewal.
type stalledRenewer struct {
	rounds  int
	mu      sync.Mutex
	calls   int
	release chan struct{}
}

func (s *stalledRenewer) Renew(ctx context.Context, _ time.Duration, keys []quorum.RenewKey) []quorum.RenewResult {
	s.mu.Lock()
	s.calls++
	stall := s.calls > s.rounds
	s.mu.Unlock()
	if stall {
		select {
		case <-s.release:
		case <-ctx.Done():
		}
	}
	out := make([]quorum.RenewResult, len(keys))
	for i := range out {
		out[i] = quorum.RenewResult{OK: 3}
	}
	return out
}

// TestHoldsRenewedEarlyInARenewalLiveWhileItsLastRoundStalls: a renewal's
// first round renews its holds, and its second stalls past their old
// expiry. The first round's holds live on: their new expiry counts, though
// their place among the expiries is only made anew when the renewal ends
// (see refresh). Only the stalled round's hold is lost, for want of a
// quorum.
func TestHoldsRenewedEarlyInARenewalLiveWhileItsLastRoundStalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		renewer := &stalledRenewer{rounds: 1, release: make(chan struct{})}
		defer close(renewer.release)
		h := newHarnessWith(t, renewer)
		holds := make([]*Hold, roundSize+1)
		for i := range holds {
			holds[i] = &Hold{Name: fmt.Sprint("h", i), Holder: "x"}
			h.w.Add(holds[i], h.clock.Now().Add(rules.Validity(lease, 0, 0.01)))
		}
		h.settle()
		h.run(lease) // the first renewal starts at lease/3, and stalls in its second round
		select {
		case e := <-h.lost:
			if e.hold != holds[roundSize] || e.loss.Reason != ReasonQuorum {
				t.Fatalf("lost %s (%+v); want only %s, for want of a quorum", e.hold.Name, e.loss, holds[roundSize].Name)
			}
		default:
			t.Fatalf("%s, whose renewal stalled, was not lost", holds[roundSize].Name)
		}
		h.expectNoLoss()
	})
}

// slowRenewer renews every hold, each Renew call answering took after it
// began on clock: a host so loaded that one renewal of every hold takes
// longer than two intervals.
type slowRenewer struct {
	clock *clock.Fake
	took  time.Duration
}

func (s slowRenewer) Renew(ctx context.Context, _ time.Duration, keys []quorum.RenewKey) []quorum.RenewResult {
	t := s.clock.NewTimer(s.took)
	defer t.Stop()
	select {
	case <-t.C():
	case <-ctx.Done():
	}
	out := make([]quorum.RenewResult, len(keys))
	for i := range out {
		out[i] = quorum.RenewResult{OK: 3}
	}
	return out
}

// TestARenewalLongerThanTwoIntervalsIsFollowedAtOnce: three rounds of
// 0.7s each make a renewal of 2.1s, more than two intervals (1s each at a
// 3s lease). The ticks that came while it ran must not be dropped: the
// next renewal starts as it ends. Dropped, the next waited for the tick
// after, a whole lease after the last began, and the holds of its first
// round expired before it came (BenchmarkRenewIdle100kHolds beside CPU
// hogs: a renewal of 75,000 holds took 11s at a 15s lease, and every hold
// was lost, on main as on the branch that kept its renewal order).
func TestARenewalLongerThanTwoIntervalsIsFollowedAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := clock.NewFake(time.Unix(1000, 0))
		h := newHarnessWithClock(t, slowRenewer{clock: fake, took: 700 * time.Millisecond}, fake)
		const step = 10 * time.Millisecond
		h.runBy(step, 900*time.Millisecond)
		for i := range 2*roundSize + 1 { // three rounds
			h.w.Add(&Hold{Name: fmt.Sprint("h", i), Holder: "x"}, h.clock.Now().Add(rules.Validity(lease, 0, 0.01)))
		}
		h.settle()
		h.runBy(step, 1600*time.Millisecond) // the first renewal began at 1s; its last round at 2.4s
		late := h.add("added in the renewal's last round", false, rules.Validity(lease, 0, 0.01))
		h.runBy(step, 4*lease)
		h.expectNoLoss()
		if _, lost := h.w.Lost(late); lost {
			t.Fatalf("%s lost", late.Name)
		}
	})
}

// TestAHoldAddedDuringARoundIsRenewedAfterTheHoldsThatRoundRenewed: the
// holds a round renews count their validity from its start, so a hold
// added after that start expires later than they do, and is renewed after
// them next time. Here a renewal takes 2.1s in three rounds of 0.7s, each
// hold's renewal comes a renewal later, and a hold with a longer lease is
// added just after the second round began. Put behind the holds renewed
// before it was added (the renewal order kept as holds were renewed, not
// as their validity counts), it went before the second round's holds and
// pushed the last of them into the next renewal's third round, after its
// expiry.
func TestAHoldAddedDuringARoundIsRenewedAfterTheHoldsThatRoundRenewed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := clock.NewFake(time.Unix(1000, 0))
		h := newHarnessWithClock(t, slowRenewer{clock: fake, took: 700 * time.Millisecond}, fake)
		const step = 10 * time.Millisecond
		h.runBy(step, 900*time.Millisecond)
		for i := range 2*roundSize + 1 { // three rounds
			h.w.Add(&Hold{Name: fmt.Sprint("h", i), Holder: "x"}, h.clock.Now().Add(rules.Validity(lease, 0, 0.01)))
		}
		h.settle()
		h.runBy(step, 850*time.Millisecond) // the first renewal began at 1s; its second round at 1.7s
		late := &Hold{Name: "added in the second round", Holder: "x", Lease: 2 * lease}
		h.w.Add(late, h.clock.Now().Add(rules.Validity(2*lease, 0, 0.01)))
		h.runBy(step, 4*lease)
		h.expectNoLoss()
	})
}

// TestTheRenewalOrderHoldsEveryRenewedHoldOnceInQueuedOrder drives the
// watchdog's own steps (Add, Remove, Revoke, a round's keys and its
// answers) in random order, with rounds that overlap adds and removals, and
// checks after each that the renewal order is well linked, holds every
// watched hold that is renewed once and nothing else, and is in the
// order of when each was queued.
func TestTheRenewalOrderHoldsEveryRenewedHoldOnceInQueuedOrder(t *testing.T) {
	fake := clock.NewFake(time.Unix(1000, 0))
	w := New(Config{Lease: lease, DriftFactor: 0.01, Masters: 3, Renewer: okRenewer{}, Clock: fake, OnLost: func(*Hold, Loss) {}})
	rng := rand.New(rand.NewPCG(1, 2))
	var holds []*Hold
	var pending []round // rounds sent, not yet applied
	check := func(step int) {
		t.Helper()
		w.mu.Lock()
		defer w.mu.Unlock()
		seen := map[*Hold]bool{}
		var prev *Hold
		for h := w.order.front; h != nil; prev, h = h, h.next {
			switch {
			case h.prev != prev:
				t.Fatalf("step %d: %s's prev is not the hold before it", step, h.Name)
			case seen[h]:
				t.Fatalf("step %d: %s twice in the order", step, h.Name)
			case !w.watched(h) || h.Kind == KindFixed:
				t.Fatalf("step %d: %s in the order, not a watched renewed hold", step, h.Name)
			case prev != nil && h.queued < prev.queued:
				t.Fatalf("step %d: %s queued %d after %s queued %d", step, h.Name, h.queued, prev.Name, prev.queued)
			}
			seen[h] = true
		}
		if w.order.back != prev {
			t.Fatalf("step %d: the order's back is not its last hold", step)
		}
		for _, e := range w.byExpiry {
			if e.h.Kind != KindFixed && !seen[e.h] {
				t.Fatalf("step %d: watched %s not in the order", step, e.h.Name)
			}
		}
	}
	for step := range 5000 {
		fake.Advance(time.Duration(rng.IntN(50)) * time.Millisecond)
		switch op := rng.IntN(10); {
		case op < 4 || len(holds) == 0: // a hold added, or one removed added anew
			h := &Hold{Name: fmt.Sprint("h", step), Holder: "x"}
			if rng.IntN(8) == 0 {
				h.Kind, h.Lease = KindFixed, lease
			}
			if len(holds) > 0 && rng.IntN(4) == 0 {
				h = holds[rng.IntN(len(holds))]
			}
			w.Add(h, fake.Now().Add(rules.Validity(lease, 0, 0.01)))
			holds = append(holds, h)
		case op < 5:
			w.Remove(holds[rng.IntN(len(holds))])
		case op < 6:
			w.Revoke(holds[rng.IntN(len(holds))], "")
		case op < 8: // a round's keys taken, of a few holds from the front
			all := w.renewable(nil)
			var r round
			r.holds, r.leases, _, r.number = w.renewKeys(all[:min(len(all), 1+rng.IntN(20))], nil)
			r.start = fake.Now()
			for range r.holds {
				r.res = append(r.res, quorum.RenewResult{OK: rng.IntN(4), Gone: rng.IntN(2)})
			}
			pending = append(pending, r)
		default: // the oldest round's answers applied
			if len(pending) > 0 {
				r := pending[0]
				pending = pending[1:]
				r.last = len(pending) == 0
				w.apply(r)
			}
		}
		check(step)
	}
}

// readdingRenewer renews with a real (unstarted) Cluster, which prepares
// each key's renewal, and while the first call runs removes hold and adds
// it anew as another name, as Hold allows.
type readdingRenewer struct {
	c    *quorum.Cluster
	w    *Watchdog
	hold *Hold
	once sync.Once
}

func (r *readdingRenewer) Renew(ctx context.Context, lease time.Duration, keys []quorum.RenewKey) []quorum.RenewResult {
	out := r.c.Renew(ctx, lease, keys)
	r.once.Do(func() {
		r.w.Remove(r.hold)
		r.hold.Name = "renamed"
		r.w.Add(r.hold, r.w.cfg.Clock.Now().Add(lease))
	})
	return out
}

// TestAHoldAddedAnewDuringItsRoundKeepsNoRenewalPreparedForWhatItWas: a
// hold removed and added anew as another name while its round runs must
// not keep the renewal the round prepared for its old name (its next
// renewal would renew the old name's key, find the new one's holder gone
// there, and revoke it).
func TestAHoldAddedAnewDuringItsRoundKeepsNoRenewalPreparedForWhatItWas(t *testing.T) {
	c, err := quorum.New(quorum.Config{KeyPrefix: "t:", Masters: []quorum.MasterConfig{{Name: "a", Address: "127.0.0.1:1"}}})
	if err != nil {
		t.Fatal(err)
	}
	fake := clock.NewFake(time.Unix(1000, 0))
	hold := &Hold{Name: "old", Holder: "x"}
	renewer := &readdingRenewer{c: c, hold: hold}
	w := New(Config{Lease: lease, DriftFactor: 0.01, Masters: 1, Renewer: renewer, Clock: fake, OnLost: func(*Hold, Loss) {}})
	renewer.w = w
	w.Add(hold, fake.Now().Add(lease))
	done := make(chan round, 2)
	w.renew(context.Background(), done)
	w.mu.Lock()
	defer w.mu.Unlock()
	if hold.prepared != (quorum.Prepared{}) {
		t.Fatal("the hold added anew as another name kept the renewal prepared for its old name")
	}
}

// TestAnEndMovedEarlierWhileARenewalRunsIsKept: a hold its renewal's first
// round renewed is placed among the expiries only when the renewal ends
// (see refresh); an End moved earlier meanwhile, while the second round
// stalls, still ends it at that End, not at the later expiry the round
// gave it, nor at the renewal's end.
func TestAnEndMovedEarlierWhileARenewalRunsIsKept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		renewer := &stalledRenewer{rounds: 1, release: make(chan struct{})}
		h := newHarnessWith(t, renewer)
		holds := make([]*Hold, roundSize+1)
		for i := range holds {
			holds[i] = &Hold{Name: fmt.Sprint("h", i), Holder: "x"}
			h.w.Add(holds[i], h.clock.Now().Add(rules.Validity(lease, 0, 0.01)))
		}
		h.settle()
		h.run(lease/3 + 100*time.Millisecond) // the first round renewed holds[0]; the second stalls
		end := h.clock.Now().Add(300 * time.Millisecond)
		if _, ok := h.w.SetEnd(holds[0], end); !ok {
			t.Fatal("holds[0] is not watched")
		}
		h.run(400 * time.Millisecond)
		h.expectLoss(holds[0], ReasonExpired, end)
		close(renewer.release)
		h.settle()
		h.expectNoLoss()
	})
}
