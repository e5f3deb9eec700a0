package server

import (
	"sync"
	"testing"

	"github.com/lock-agent/lock-agent/agent/locks"
	"github.com/lock-agent/lock-agent/protocol"
	"github.com/lock-agent/lock-agent/quorum"
)

// inFlight runs n requests on s at once, each deleting its own entry of
// s.turns and s.locks (as its turn and wait end) before it returns, and
// waits for all of them.
func inFlight(s *session, n int) {
	s.mu.Lock()
	for i := range n {
		key := locks.HoldKey{Name: string(rune('a' + i%26)), Owner: string(rune('0' + i))}
		s.turns[key] = &turn{}
		p := s.pendingLocked(key.Owner + key.Name)
		p.turn, p.wait = &turn{tag: key.Owner + key.Name, lock: true}, waiterTagged(key.Owner+key.Name)
		s.waiting++
	}
	s.mu.Unlock()
	var started sync.WaitGroup
	release := make(chan struct{})
	started.Add(n)
	for i := range n {
		key := locks.HoldKey{Name: string(rune('a' + i%26)), Owner: string(rune('0' + i))}
		s.spawn("t", func() error {
			started.Done()
			<-release
			s.mu.Lock()
			delete(s.turns, key)
			p := s.locks[key.Owner+key.Name]
			s.untagLocked(p.turn)
			s.dropWaitLocked(p.wait)
			s.mu.Unlock()
			return nil
		})
	}
	started.Wait()
	close(release)
	s.reqs.Wait()
}

// waiterTagged is a wait of the LOCK tag (a multi-lock's: nothing answers it).
func waiterTagged(tag string) *locks.Waiter {
	return new(locks.Manager).NewWaiter(nil, tag, protocol.Lock{Names: []string{"x"}}, quorum.Who{}, true, nil)
}

func TestABurstsEmptiedMapsAreDroppedAndOrdinaryOnesKept(t *testing.T) {
	for _, tc := range []struct {
		name     string
		inFlight int
		dropped  bool
	}{
		{"a burst of pipelined requests leaves no map sized for it", burstInflight + 1, true},
		{"requests below a burst keep their maps (no allocation per request)", burstInflight, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &session{turns: map[locks.HoldKey]*turn{}, locks: map[string]*pendingLock{}}
			inFlight(s, tc.inFlight)
			s.mu.Lock()
			defer s.mu.Unlock()
			if dropped := s.turns == nil && s.locks == nil; dropped != tc.dropped {
				t.Fatalf("turns and locks dropped: %v, want %v", dropped, tc.dropped)
			}
			if len(s.locks) != 0 || s.waiting != 0 || s.burst {
				t.Fatalf("locks %v, waiting %d, burst %v: want none and no burst", s.locks, s.waiting, s.burst)
			}
		})
	}
}
