package renewal

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/lock-agent/lock-agent/quorum/rules"

	"github.com/lock-agent/lock-agent/quorum"
)

// TestTTLHoldEnds drives ttl= holds (a Hold with an End) on the fake clock:
// renewed like any hold, each ends where its End (or, failing renewals, its
// deadline) says, with the reason that says which, and SetEnd moves it.
func TestTTLHoldEnds(t *testing.T) {
	valid := rules.Validity(lease, 0, 0.01) // a grant's deadline, from the start
	lead := max(10*time.Millisecond, lease/50)
	for _, tc := range []struct {
		name     string
		ttl      time.Duration // End is start + ttl
		renewed  bool          // a majority renews it
		moveAt   time.Duration // if > 0, SetEnd(now + moveTo) at start + moveAt
		moveTo   time.Duration
		wantAt   time.Duration // when it is lost, from the start
		reason   Reason
		validity time.Duration // what Validity says right after the grant (and after SetEnd)
	}{
		{name: "a ttl longer than the lease is renewed and ends at its end exactly",
			ttl: 4 * lease, renewed: true, wantAt: 4 * lease, reason: ReasonExpired, validity: valid},
		{name: "a ttl shorter than the lease ends at its ttl",
			ttl: 300 * time.Millisecond, renewed: true, wantAt: 300 * time.Millisecond, reason: ReasonExpired, validity: 300 * time.Millisecond},
		{name: "a ttl that ends before its deadline's lead needs no renewal",
			ttl: valid - lead - time.Millisecond, wantAt: valid - lead - time.Millisecond, reason: ReasonExpired, validity: valid - lead - time.Millisecond},
		{name: "a ttl= hold that is not renewed is lost a lead before its deadline, before its end",
			ttl: 4 * lease, wantAt: valid - lead, reason: ReasonQuorum, validity: valid},
		{name: "an end within the lead of the deadline is lost as the deadline says",
			ttl: valid - lead/2, wantAt: valid - lead, reason: ReasonQuorum, validity: valid - lead/2},
		{name: "SetEnd moves the end later",
			ttl: lease, renewed: true, moveAt: lease / 2, moveTo: 3 * lease, wantAt: lease/2 + 3*lease, reason: ReasonExpired,
			validity: lease/3 + valid - lease/2}, // the deadline of the renewal at lease/3
		{name: "SetEnd moves the end earlier",
			ttl: 4 * lease, renewed: true, moveAt: lease / 2, moveTo: 200 * time.Millisecond, wantAt: lease/2 + 200*time.Millisecond, reason: ReasonExpired, validity: 200 * time.Millisecond},
		{name: "SetEnd to now ends the hold at once",
			ttl: 4 * lease, renewed: true, moveAt: lease / 2, moveTo: 0, wantAt: lease / 2, reason: ReasonExpired, validity: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t)
				if !tc.renewed {
					h.renewer.set(quorum.RenewResult{OK: 1})
				}
				start := h.clock.Now()
				hold := &Hold{Name: "t", Holder: "x", End: start.Add(tc.ttl)}
				h.w.Add(hold, start.Add(valid))
				h.settle()
				if tc.moveAt == 0 {
					if v, ok := h.w.Validity(hold); !ok || v != tc.validity {
						t.Fatalf("validity %v %v after the grant, want %v", v, ok, tc.validity)
					}
				} else {
					h.runTo(start.Add(tc.moveAt))
					v, ok := h.w.SetEnd(hold, h.clock.Now().Add(tc.moveTo))
					if !ok || v != tc.validity {
						t.Fatalf("SetEnd: validity %v %v, want %v", v, ok, tc.validity)
					}
					h.settle()
				}
				lostAt := start.Add(tc.wantAt)
				h.runTo(lostAt.Add(-time.Millisecond))
				h.expectNoLoss()
				h.clock.Advance(lostAt.Sub(h.clock.Now()))
				h.settle()
				h.expectLoss(hold, tc.reason, lostAt)
				if h.clock.Now() != lostAt {
					t.Fatalf("the clock is at %v, want %v", h.clock.Now().Sub(start), tc.wantAt)
				}
				if _, ok := h.w.SetEnd(hold, h.clock.Now().Add(time.Hour)); ok {
					t.Fatal("SetEnd of a lost hold succeeded")
				}
				if tc.renewed && tc.wantAt > lease/3 && h.renewer.keys == 0 {
					t.Fatal("a ttl= hold was not renewed")
				}
			})
		})
	}
}

// TestATTLHoldIsReleasedAtItsEnd: Deadline, which the agent releases a lost
// hold at, is the End of a ttl= hold that ended there, and the deadline of
// one lost for want of renewals.
func TestATTLHoldIsReleasedAtItsEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		start := h.clock.Now()
		ended := &Hold{Name: "ended", Holder: "x", End: start.Add(lease / 2)}
		h.w.Add(ended, start.Add(rules.Validity(lease, 0, 0.01)))
		h.run(lease / 2)
		h.expectLoss(ended, ReasonExpired, start.Add(lease/2))
		if d := h.w.Deadline(ended); d != ended.End {
			t.Fatalf("released at %v, want its end %v", d.Sub(start), lease/2)
		}
		h.renewer.set(quorum.RenewResult{OK: 1})
		unrenewed := &Hold{Name: "unrenewed", Holder: "x", End: h.clock.Now().Add(10 * lease)}
		deadline := h.clock.Now().Add(rules.Validity(lease, 0, 0.01))
		h.w.Add(unrenewed, deadline)
		h.runTo(deadline.Add(-h.w.lead(unrenewed)))
		h.expectLoss(unrenewed, ReasonQuorum, deadline)
		if d := h.w.Deadline(unrenewed); d != deadline {
			t.Fatalf("released at %v, want its deadline %v", d, deadline)
		}
	})
}

// runTo advances the fake clock to at in 100ms steps, letting the watchdog work.
func (h *harness) runTo(at time.Time) {
	for h.clock.Now().Before(at) {
		h.clock.Advance(min(100*time.Millisecond, at.Sub(h.clock.Now())))
		h.settle()
	}
}
