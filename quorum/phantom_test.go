package quorum

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/redistest"
	"github.com/lock-agent/lock-agent/quorum/clock"
)

// stallClock is the real clock until the masters have run a grant
// (granted says so, once armed): the next reading of it runs during, then
// finds the clock moved on by jump, as if the agent's host had stalled
// that long between sending the round and reading its answers. Every
// reading waits while during runs, so that no other goroutine of the
// cluster reads the clock in between.
type stallClock struct {
	clock.Real
	mu      sync.Mutex
	granted func() bool // nil: not armed, or fired
	during  func()
	jump    time.Duration
	offset  time.Duration
}

func (s *stallClock) arm(granted func() bool, during func(), jump time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.granted, s.during, s.jump = granted, during, jump
}

func (s *stallClock) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.granted != nil && s.granted() {
		s.granted = nil
		s.during()
		s.offset = s.jump
	}
	return time.Now().Add(s.offset)
}

// TestLeaderTakesNoTermFromAGrantThatDidNotStand: the masters all grant
// in step, at one fence, but the granting agent reads their answers only
// after the lease's validity is used up (its host stalled), and gives the
// grant back: no client was granted that term. A leader read between the
// masters' grant and the agent's decision (here: while the agent stalls)
// must not take it as a term: an observer pushed it would name a leader
// that never was (TestElectionRapidTurns's observer-phantom). Any round
// whose records stand on a majority before its agent decides leaves the
// same state: TestElectionRapidTurns's phantoms came 170ms into a
// candidate's wait, far short of a stall of a lease, from a round lost to
// a master that granted after its deadline (the give-back ran after the
// read), and a failed fence write-back would do as well. The grant that
// stands after it is read once its agent says so.
func TestLeaderTakesNoTermFromAGrantThatDidNotStand(t *testing.T) {
	ctx := context.Background()
	servers := redistest.Start(t, 3)
	clock := &stallClock{}
	cfg := testConfig(t, servers, time.Second, true)
	cfg.Clock = clock
	agent := startCluster(t, cfg)
	observer := newCluster(t, servers, time.Second)
	observer.MarkObserved(ctx, "e", time.Minute)

	r := req("e", "phantom")
	recorded := func() bool { // a majority records the grant: it may be decided now
		n := 0
		for _, s := range servers {
			if got, _ := s.Do("EXISTS", "t:{e}:h:phantom"); got == "1" {
				n++
			}
		}
		return n >= agent.quorum
	}
	var read []string
	stalled := false
	during := func() {
		stalled = true
		for _, lenient := range []bool{false, true} {
			h, ok, err := observer.Leader(ctx, "e", lenient)
			if ok && err == nil {
				read = append(read, h.ID)
			}
			if err != nil && !errors.Is(err, ErrUnsettled) {
				t.Errorf("Leader (lenient %v) during the stall: %v", lenient, err)
			}
		}
	}
	clock.arm(recorded, during, 2*r.Lease)
	if g, refusal, err := agent.Acquire(ctx, r); refusal == nil || err != nil {
		t.Fatalf("a grant read after its validity was used up stood: %+v, %v, %v", g, refusal, err)
	}
	if !stalled { // the test proved nothing
		t.Fatal("the clock never stalled with the grant recorded")
	}
	if len(read) > 0 {
		t.Fatalf("Leader named %v the leader while its grant was undecided, and it did not stand", read)
	}

	// The next grant, which stands, is the leader once its agent says so
	// (which publishes).
	w := observer.Watch(ctx, "e")
	defer w.Close()
	awaitSubscribed(t, observer, servers, "e")
	r.Holder = "next"
	g, err := acquire(ctx, agent, r)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.After(5 * time.Second)
	for {
		h, ok, err := observer.Leader(ctx, "e", false)
		if err == nil && ok && h.ID == "next" && h.Record.Fence == g.Fence {
			break
		}
		select {
		case <-w.Leader():
		case <-deadline:
			t.Fatalf("Leader of a grant that stood = %+v, %v, %v; want next at fence %d", h, ok, err, g.Fence)
		}
	}
}

// TestLeaderDoesNotWaitForAPausedVoterWhileAGrantAwaitsItsAgent: a
// holder whose records await its agent's mark is unsettled whatever the
// masters still to answer say, so a read does not wait for a paused one
// (an observer's push would wait a round's deadline behind it, after the
// mark landed and published); once a record is marked, it is the leader.
func TestLeaderDoesNotWaitForAPausedVoterWhileAGrantAwaitsItsAgent(t *testing.T) {
	ctx := context.Background()
	servers := redistest.Start(t, 3)
	cfg := testConfig(t, servers, time.Second, true)
	cfg.MasterTimeout = 3 * time.Second // a read that waits for the paused master takes this long
	c := startCluster(t, cfg)
	for _, s := range servers[:2] {
		plantClaim(s, "a", "h", Claim{})
		s.Do("HSET", "t:{a}:h:h", "fence", "5", "settled", awaitingAgent)
	}
	servers[2].Pause()
	defer servers[2].Resume()
	start := time.Now()
	if h, ok, err := c.Leader(ctx, "a", true); !errors.Is(err, ErrUnsettled) || time.Since(start) >= cfg.MasterTimeout {
		t.Fatalf("Leader of a holder awaiting its agent = %+v, %v, %v after %v; want ErrUnsettled before the paused master's deadline",
			h, ok, err, time.Since(start))
	}
	servers[1].Do("HSET", "t:{a}:h:h", "settled", "5")
	start = time.Now()
	if h, ok, err := c.Leader(ctx, "a", false); err != nil || !ok || h.Record.Fence != 5 || time.Since(start) >= cfg.MasterTimeout {
		t.Fatalf("Leader of a holder its agent marked = %+v, %v, %v after %v; want fence 5 before the paused master's deadline",
			h, ok, err, time.Since(start))
	}
}
