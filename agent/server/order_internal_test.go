package server

import (
	"testing"

	"github.com/lock-agent/lock-agent/agent/locks"
)

// TestARequestBehindAnAnsweredLockTakesEffectInItsLine: a LOCK's reply is
// queued a moment before its turn is finished, and a client that read the
// reply may send an UNLOCK of the hold and a HOLDS at once. The UNLOCK
// must take effect before the HOLDS is read (before inTurn returns to the
// reader), not in a goroutine of its own that a loaded host runs later:
// the Python client's HOLDS after a cancelled release still listed the
// hold. A request behind a LOCK not yet answered still waits in its own
// goroutine.
func TestARequestBehindAnAnsweredLockTakesEffectInItsLine(t *testing.T) {
	key := locks.HoldKey{Name: "x"}
	for _, tc := range []struct {
		name     string
		answered bool
		inLine   bool
	}{
		{"behind a LOCK whose reply is queued: in its line", true, true},
		{"behind a LOCK still waiting: later, in its own goroutine", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := &Server{}
			srv.live.Store(&live{limits: Limits{MaxHoldsPerSession: 10}})
			s := &session{srv: srv}
			lock := &turn{done: make(chan struct{}), keys: []locks.HoldKey{key}, tag: "L", lock: true, answered: tc.answered}
			s.mu.Lock()
			s.takeTurnLocked(lock)
			s.mu.Unlock()
			if !tc.answered {
				// The LOCK is answered and finished after the UNLOCK's line was read.
				defer s.finish(lock)
			} else {
				go s.finish(lock) // the LOCK's goroutine, just after queuing its reply
			}
			applied := make(chan struct{})
			if err := s.inTurn("U", []locks.HoldKey{key}, func() error { close(applied); return nil }); err != nil {
				t.Fatal(err)
			}
			select {
			case <-applied:
				if !tc.inLine {
					t.Fatal("the request took effect before the LOCK it waits for was answered")
				}
			default:
				if tc.inLine {
					t.Fatal("the request had not taken effect when its line was done: a HOLDS read next would not see it")
				}
			}
		})
	}
}
