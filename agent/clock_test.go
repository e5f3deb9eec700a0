package agent_test

import (
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/agent"
	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/quorum/clock"
)

// startOnFakeClock starts an agent over three real masters whose time (back-off,
// wait=, idle_timeout, leases) moves only when the test advances clock. The
// lease is an hour, so that no renewal falls due in the minutes a test moves
// the clock by.
func startOnFakeClock(t *testing.T, mutate func(*agent.Config)) (*agenttest.Agent, *clock.Fake) {
	clock := clock.NewFake(time.Now())
	a, _ := start(t, func(c *agent.Config) {
		c.Lock.Lease = time.Hour
		c.Lock.MaxTTL = time.Hour
		c.Clock = clock
		if mutate != nil {
			mutate(c)
		}
	})
	return a, clock
}

func TestAWaitRunsOutAsBusyOnTheAgentsClock(t *testing.T) {
	a, clock := startOnFakeClock(t, nil)
	agenttest.Dial(t, a.Config.Socket.Path).Do("LOCK w")
	c := agenttest.Dial(t, a.Config.Socket.Path)
	_, ch := c.Send("LOCK w wait=10m") // a real timer would not end it in this test
	c.AwaitWaiters(1)
	// The wait= timer runs within Advance (see clock.Fake.AfterFunc):
	// had it been due, its BUSY would be queued before the PING's reply.
	clock.Advance(10*time.Minute - time.Millisecond)
	c.Do("PING")
	select {
	case r := <-ch:
		t.Fatalf("answered %s before its wait ran out", r.Line)
	default:
	}
	clock.Advance(time.Millisecond)
	if r := c.Await(ch); r.Kind != "BUSY" {
		t.Fatalf("got %s when its wait ran out", r.Line)
	}
	if r := c.Do("STATUS"); r.Int("waiters") != 0 {
		t.Fatalf("the wait is still queued: %s", r.Line)
	}
}

// TestIdleSessionsAreClosedOnTheAgentsClock: a session with no hold, no
// wait and no request for idle_timeout is closed; one with a hold or a
// wait is not, and one that sent a request is closed idle_timeout after
// that request. An idle check that runs late (the test does not wait for
// them) still closes a session no sooner than idle_timeout after its last
// request, and never one with a hold or a wait. The checks run within
// Advance (see clock.Fake.AfterFunc), so when it returns every
// session one closed has been told BYE, and the others are seen open.
func TestIdleSessionsAreClosedOnTheAgentsClock(t *testing.T) {
	const idle = time.Minute
	a, clock := startOnFakeClock(t, func(c *agent.Config) { c.Limits.IdleTimeout = idle })
	blocker := agenttest.Dial(t, a.Config.Socket.Path)
	blocker.Do("LOCK taken")
	quiet := agenttest.Dial(t, a.Config.Socket.Path)
	quiet.Do("PING")
	holding := agenttest.Dial(t, a.Config.Socket.Path)
	holding.Do("LOCK mine")
	waiting := agenttest.Dial(t, a.Config.Socket.Path)
	waiting.Send("LOCK taken wait=forever")
	blocker.AwaitWaiters(1)
	chatty := agenttest.Dial(t, a.Config.Socket.Path)
	awaitOpen(t, a, 5) // the harness's readiness check closed its own
	clock.Advance(idle / 2)
	chatty.Do("PING") // half an idle_timeout after the others' last requests
	open := func(names ...string) {
		t.Helper()
		if n := agent.OpenSessions(a.Agent); n != len(names) {
			t.Fatalf("%d sessions open, want %d: %v", n, len(names), names)
		}
		conns := map[string]*agenttest.Conn{"blocker": blocker, "holding": holding, "waiting": waiting, "chatty": chatty}
		for _, name := range names {
			select {
			case <-conns[name].Closed():
				t.Fatalf("the %s session was closed as idle", name)
			default:
			}
		}
	}
	awaitClosed := func(name string, c *agenttest.Conn) {
		t.Helper()
		select {
		case <-c.Closed():
		case <-time.After(5 * time.Second):
			t.Fatalf("the %s session was not closed once idle", name)
		}
	}

	clock.Advance(idle / 2) // every session's first idle check falls due
	awaitClosed("quiet", quiet)
	if p := quiet.Push(time.Second); p != "* BYE reason=idle" {
		t.Fatalf("idle session was told %q", p)
	}
	open("blocker", "holding", "waiting", "chatty")

	clock.Advance(idle/2 - time.Millisecond) // just short of idle_timeout since the chatty session's request
	open("blocker", "holding", "waiting", "chatty")
	clock.Advance(time.Millisecond)
	awaitClosed("chatty", chatty)
	open("blocker", "holding", "waiting")

	if r := holding.Do("UNLOCK mine"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	clock.Advance(idle)
	awaitClosed("holding", holding)
	open("blocker", "waiting")
}

// awaitOpen waits until a has n open sessions (see agent.OpenSessions).
func awaitOpen(t *testing.T, a *agenttest.Agent, n int) {
	t.Helper()
	open := 0
	lockagenttest.Eventually(t, 5*time.Second, func() bool { open = agent.OpenSessions(a.Agent); return open == n },
		"%d sessions open, want %d", &open, n)
}
