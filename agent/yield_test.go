package agent_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/agent"
	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
	"github.com/lock-agent/lock-agent/quorum/clock"
)

// armLog is a clock.Fake that counts the timers armed for each duration,
// and those of them not stopped yet.
type armLog struct {
	*clock.Fake
	mu    sync.Mutex
	armed map[time.Duration]int
	live  map[time.Duration]int
}

func (c *armLog) NewTimer(d time.Duration) clock.Timer {
	c.mu.Lock()
	c.armed[d]++
	c.live[d]++
	c.mu.Unlock()
	return &loggedTimer{Timer: c.Fake.NewTimer(d), log: c, d: d} // then TimerArmed signals
}

// await waits until ok holds of the log, checking it whenever a timer is armed.
func (c *armLog) await(t *testing.T, what string, ok func(armed, live map[time.Duration]int) bool) {
	t.Helper()
	c.awaitDriving(t, what, ok, 0)
}

// awaitRetrying is await, advancing the clock past each back-off timer
// (under the agent's retry_max, and some) as it is armed: the attempts a
// busy host's slow rounds make before the one the test waits for.
func (c *armLog) awaitRetrying(t *testing.T, what string, ok func(armed, live map[time.Duration]int) bool) {
	t.Helper()
	c.awaitDriving(t, what, ok, 300*time.Millisecond)
}

// awaitDriving waits until ok holds of the log, checking it whenever a
// timer is armed, and advances the clock past each live timer shorter
// than below once per arming.
func (c *armLog) awaitDriving(t *testing.T, what string, ok func(armed, live map[time.Duration]int) bool, below time.Duration) {
	t.Helper()
	driven := map[time.Duration]int{}
	deadline := time.After(5 * time.Second)
	for {
		c.mu.Lock()
		done := ok(c.armed, c.live)
		var retry time.Duration
		for d, n := range c.armed {
			if d < below && n > driven[d] && c.live[d] > 0 {
				retry = d
			}
		}
		c.mu.Unlock()
		if done {
			return
		}
		if retry > 0 {
			driven[retry]++
			c.Advance(retry)
			continue
		}
		select {
		case <-c.TimerArmed():
		case <-deadline:
			c.mu.Lock()
			defer c.mu.Unlock()
			t.Fatalf("%s; timers armed: %v", what, c.armed)
		}
	}
}

// loggedTimer is a timer of an armLog. Only Stop is used on the timers
// this test looks for.
type loggedTimer struct {
	clock.Timer
	log *armLog
	d   time.Duration
}

func (t *loggedTimer) Stop() bool {
	stopped := t.Timer.Stop()
	if stopped {
		t.log.mu.Lock()
		t.log.live[t.d]--
		t.log.mu.Unlock()
	}
	return stopped
}

// TestAContenderStandingBackWaitsOnTheAgentsClock: a contender told to
// stand back for another agent's waiter (after a run of local holders it
// waited for) parks on a timer for the time left, rather than looking at
// its queue again and again, and makes no round on the masters until the
// clock has passed it; then it makes one, and wins the released name.
func TestAContenderStandingBackWaitsOnTheAgentsClock(t *testing.T) {
	// Durations no other timer has. The other agent's hold outlasts the
	// lease, so the contender parks for the lease (see contender.busy).
	const yield, lease = 7*time.Minute + 13*time.Millisecond, 1234 * time.Millisecond
	clock := &armLog{Fake: clock.NewFake(time.Now()), armed: map[time.Duration]int{}, live: map[time.Duration]int{}}
	a, servers := start(t, func(c *agent.Config) {
		c.Lock.Lease, c.Lock.MaxTTL = lease, time.Hour
		c.Clock = clock
	})
	// Another agent's hold of an hour, written as its agent writes it: an
	// agent with other settings (a lease of an hour) would grant nothing
	// here, since the masters record this agent's.
	other := otherAgentHold{servers: servers, name: "n", holder: "other/1/1//1"}
	other.lock(t)
	waiter := agenttest.Dial(t, a.Config.Socket.Path)
	_, ch := waiter.Send("LOCK n wait=forever")
	waiter.AwaitWaiters(1)
	// A round that met a slow majority (a busy host) is retried after a
	// back-off of a few ms on the agent's clock: the test drives those
	// until the contender hears the hold and parks for it.
	clock.awaitRetrying(t, "the contender did not park behind the other agent's hold", func(_, live map[time.Duration]int) bool {
		return live[lease] > 0
	})
	if !agent.StandBack(a.Agent, "n", clock.Now().Add(yield)) {
		t.Fatal("the name has no queue")
	}
	// Parked, or standing back, after StandBack, the contender has no round
	// under way that began before it: every look from now on sees it.
	clock.await(t, "the contender neither parked nor stood back", func(armed, live map[time.Duration]int) bool {
		return live[lease] > 0 || armed[yield] > 0
	})
	other.unlock(t)

	// The release wakes the contender, which must park for the yield left.
	clock.await(t, fmt.Sprintf("the contender did not wait out its stand-back on a timer of %v", yield), func(armed, _ map[time.Duration]int) bool {
		return armed[yield] > 0
	})
	clock.Advance(yield - time.Millisecond)
	if r := waiter.Do("STATUS"); r.Int("holds") != 0 || r.Int("waiters") != 1 {
		t.Fatalf("the contender did not stand back until the clock passed its yield: %s", r.Line)
	}
	select {
	case r := <-ch:
		t.Fatalf("answered %s while standing back", r.Line)
	default:
	}

	clock.Advance(time.Millisecond)
	if r := waiter.Await(ch); r.Kind != "OK" {
		t.Fatalf("got %s once the stand-back ended", r.Line)
	}
}

// otherAgentHold is an exclusive hold of name by another agent, written in
// the masters and released as that agent's hold and release would be.
type otherAgentHold struct {
	servers      []*redistest.Server
	name, holder string
}

func (h otherAgentHold) lock(t *testing.T) {
	t.Helper()
	set := "lock-agent:{" + h.name + "}"
	for _, s := range h.servers {
		for _, cmd := range [][]string{
			{"HSET", set + ":h:" + h.holder, "mode", "exclusive", "limit", "1", "slot", "0", "fence", "1", "agent", "other", "pid", "1", "uid", "0", "owner", "", "since", "0"},
			{"PEXPIRE", set + ":h:" + h.holder, "3600000"},
			{"SADD", set, h.holder},
			{"PEXPIRE", set, "3600000"},
		} {
			if _, err := s.Do(cmd...); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func (h otherAgentHold) unlock(t *testing.T) {
	t.Helper()
	set := "lock-agent:{" + h.name + "}"
	for _, s := range h.servers {
		for _, cmd := range [][]string{{"DEL", set + ":h:" + h.holder}, {"SREM", set, h.holder}, {"PUBLISH", set + ":released", h.name}} {
			if _, err := s.Do(cmd...); err != nil {
				t.Fatal(err)
			}
		}
	}
}
