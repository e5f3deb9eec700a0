package locks

import (
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/quorum/clock"
)

// TestACohortRunsTimingIsOnTheAgentsClock decides, on a fake clock, whether
// a run of local holders may pass the name on (mayPassLocked) and whether it
// reserves a further block of fences (refillDueLocked), by the run's age.
func TestACohortRunsTimingIsOnTheAgentsClock(t *testing.T) {
	const maxHold = 20 * time.Millisecond
	t0 := time.Unix(1000, 0)
	// A block is 9 fences (cohort_max_handoffs 8, and the grant's own):
	// this run got 1..9 and handed out 1 and 2.
	fresh := lending{policy: lendRun, next: 3, top: 9, block: 9, started: t0}
	cases := []struct {
		name      string
		run       func(c *lending)
		age       time.Duration
		mayPass   bool
		refillDue bool
	}{
		{name: "a fresh run with fences left passes the name on and reserves nothing yet", age: 0, mayPass: true},
		{name: "a run a quarter into its block reserves a further one while younger than refillFor",
			run: func(c *lending) { c.next = 4 }, age: refillFor - time.Millisecond, mayPass: true, refillDue: true},
		{name: "a run a quarter into its block reserves nothing once refillFor has passed",
			run: func(c *lending) { c.next = 4 }, age: refillFor, mayPass: true},
		{name: "a run that has a reservation under way does not start another",
			run: func(c *lending) { c.next, c.reserving = 4, true }, mayPass: true},
		{name: "a run whose reservation failed does not try again",
			run: func(c *lending) { c.next, c.reserveFailed = 4, true }, mayPass: true},
		{name: "a run another agent waits for reserves nothing",
			run: func(c *lending) { c.next, c.wanted = 4, true }, mayPass: true},
		{name: "a run another agent waits for passes the name on until cohort_max_hold from its grant",
			run: func(c *lending) { c.wanted = true }, age: maxHold - time.Millisecond, mayPass: true},
		{name: "a run another agent waits for ends at cohort_max_hold from its grant",
			run: func(c *lending) { c.wanted = true }, age: maxHold},
		{name: "a run no other agent waits for goes on past cohort_max_hold",
			age: 10 * maxHold, mayPass: true},
		{name: "a run whose block is used up goes on with its spare while younger than refillFor",
			run: func(c *lending) { c.next, c.spare = 10, 100 }, age: refillFor - time.Millisecond, mayPass: true},
		{name: "a run whose block is used up ends once refillFor has passed, spare or not",
			run: func(c *lending) { c.next, c.spare = 10, 100 }, age: refillFor},
		{name: "a run whose block is used up with no spare passes no more, whatever reservation is due",
			run: func(c *lending) { c.next = 10 }, refillDue: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clock := clock.NewFake(t0)
			clock.Advance(tc.age)
			a := &Manager{clock: clock, cfg: Config{CohortMaxHandoffs: 8, CohortMaxHold: maxHold}}
			c := fresh
			if tc.run != nil {
				tc.run(&c)
			}
			if got := a.mayPassLocked(&c); got != tc.mayPass {
				t.Errorf("mayPass = %v, want %v", got, tc.mayPass)
			}
			if got := a.refillDueLocked(&c); got != tc.refillDue {
				t.Errorf("refillDue = %v, want %v", got, tc.refillDue)
			}
		})
	}
}

// TestAQueueStandsBackAfterARunAnotherAgentWaitedFor: the end of such a run
// makes the name's contender stand back for cohort_max_hold/2 on the agent's
// clock; a run no other agent waited for leaves it free to try at once.
func TestAQueueStandsBackAfterARunAnotherAgentWaitedFor(t *testing.T) {
	for _, wanted := range []bool{true, false} {
		clock := clock.NewFake(time.Unix(1000, 0))
		a := &Manager{clock: clock, cfg: Config{CohortMaxHandoffs: 8, CohortMaxHold: 20 * time.Millisecond},
			names: map[string]*nameRecord{}}
		c := &lending{policy: lendRun, name: "n", wanted: wanted}
		q := &queue{name: "n"}
		a.names["n"] = &nameRecord{key: "n", lent: c, queue: q}
		if handOver := a.endCohortLocked(&Hold{lent: c}); handOver != wanted {
			t.Fatalf("wanted=%v: hand-over %v", wanted, handOver)
		}
		want := time.Duration(0)
		if wanted {
			want = 10 * time.Millisecond
		}
		if left := max(q.yieldLeft(clock.Now()), 0); left != want {
			t.Fatalf("wanted=%v: stands back %v, want %v", wanted, left, want)
		}
		clock.Advance(want)
		if left := q.yieldLeft(clock.Now()); left > 0 {
			t.Fatalf("wanted=%v: still stands back %v after cohort_max_hold/2", wanted, left)
		}
	}
}
