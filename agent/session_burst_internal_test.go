package agent

import (
	"sync"
	"testing"
)

// inFlight runs n requests on s at once, each deleting its own entry of
// s.turns, s.lockTurns and s.waits (as its turn and wait end) before it
// returns, and waits for all of them.
func inFlight(s *session, n int) {
	s.mu.Lock()
	for i := range n {
		key := holdKey{name: string(rune('a' + i%26)), owner: string(rune('0' + i))}
		s.turns[key], s.lockTurns[key.owner+key.name], s.waits[key.owner+key.name] = &turn{}, &turn{}, &waiter{}
	}
	s.mu.Unlock()
	var started sync.WaitGroup
	release := make(chan struct{})
	started.Add(n)
	for i := range n {
		key := holdKey{name: string(rune('a' + i%26)), owner: string(rune('0' + i))}
		s.spawn("t", func() error {
			started.Done()
			<-release
			s.mu.Lock()
			delete(s.turns, key)
			delete(s.lockTurns, key.owner+key.name)
			delete(s.waits, key.owner+key.name)
			s.mu.Unlock()
			return nil
		})
	}
	started.Wait()
	close(release)
	s.reqs.Wait()
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
			s := &session{turns: map[holdKey]*turn{}, lockTurns: map[string]*turn{}, waits: map[string]*waiter{}}
			inFlight(s, tc.inFlight)
			s.mu.Lock()
			defer s.mu.Unlock()
			if dropped := s.turns == nil && s.lockTurns == nil; dropped != tc.dropped {
				t.Fatalf("turns and lockTurns dropped: %v, want %v", dropped, tc.dropped)
			}
			if s.waits == nil || len(s.waits) != 0 || s.burst {
				t.Fatalf("waits %v, burst %v: want an empty map and no burst", s.waits, s.burst)
			}
		})
	}
}
