package server

import (
	"sync"
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
// goroutine, and takes effect once the LOCK is answered.
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
			// The LOCK's goroutine finishes its turn once the reader waits
			// for it (with the fix; without it the reader never does).
			waiting := make(chan struct{})
			var once sync.Once
			wait := func() { once.Do(func() { close(waiting) }) }
			awaitingAnswered = wait
			defer func() { awaitingAnswered = nil; wait() }()
			go func() {
				<-waiting
				s.finish(lock)
			}()
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
				s.finish(lock) // the LOCK is answered: the request takes effect now
				<-applied
				s.reqs.Wait()
				if tc.inLine {
					t.Fatal("the request had not taken effect when its line was done: a HOLDS read next would not see it")
				}
			}
		})
	}
}
