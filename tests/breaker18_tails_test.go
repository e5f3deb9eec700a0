package tests

import (
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/faultproxy"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// TestBreaker18TailOutlivesRestartsOfTwoMasters: a hold with delay= (or
// min_hold=) lives through two masters restarting empty one after the
// other, each re-created by the watchdog's repair once its quarantine is
// over, so the hold stays on a majority throughout. Its tail must too: a
// majority of the masters now hold a re-created record, and the delay (the
// min_hold) must still keep the name from the next holder once the hold
// ends.
func TestBreaker18TailOutlivesRestartsOfTwoMasters(t *testing.T) {
	t.Parallel() // see TestMain
	for _, tc := range []struct{ name, lock, end string }{
		{"delay, session closed", "delay=4s", "close"},
		// No min_hold case: a master that lost its data now sits out what
		// is left of the min_hold (quorum/gate.go), so once two have
		// come back it is over. TestBreaker18TailOutlivesRestartsOfTwoMastersAfterTheHold
		// has a min_hold through restarts.
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b, servers := twoAgents(t, time.Second)
			holder, other := agenttest.Dial(t, a.Config.Socket.Path), agenttest.Dial(t, b.Config.Socket.Path)
			holders := agenttest.Dial(t, a.Config.Socket.Path) // the holder's agent, as it sees its masters
			if r := holder.Do("LOCK br/tail " + tc.lock); r.Kind != "OK" {
				t.Fatal(r.Line)
			}
			for _, i := range []int{0, 1} {
				servers[i].Restart()
				// It sits out the hold's tail-to-be (see quorum/gate.go),
				// then the watchdog re-creates the hold there, once the
				// holder's agent sees it up (each agent probes for itself:
				// beside two CPU hogs, the other saw it first, and 5s
				// from then was passed).
				other.AwaitMasters("quarantined", 1)
				other.AwaitMastersWithin(15*time.Second, "up", 3)
				holders.AwaitMastersWithin(15*time.Second, "up", 3)
				if !pollFor(5*time.Second, 10*time.Millisecond, func() bool { return servers[i].Keys("lock-agent:{br/tail}:h:*") == 1 }) {
					t.Fatalf("the watchdog never re-created the hold on the master that restarted empty (the holder's pushes: %q)", drainPushes(holder))
				}
			}
			if tc.end == "close" {
				holder.Close()
			} else if r := holder.Do("UNLOCK br/tail"); r.Kind != "OK" {
				t.Fatal(r.Line)
			}
			lockagenttest.Eventually(t, 5*time.Second, func() bool { return other.Do("WHO br/tail").Int("n") == 0 },
				"the hold never ended in the masters")
			if r := other.Do("LOCK br/tail wait=0"); r.Kind != "BUSY" {
				t.Fatalf("LOCK wait=0 on the other agent just after a hold with %s ended: %q, want BUSY", tc.lock, r.Line)
			}
		})
	}
}

// TestBreaker18TailOutlivesRestartsOfTwoMastersAfterTheHold: a hold with
// delay= ends uncleanly while one master, restarted empty, sits out its
// quarantine: the tail is on the other two. Then the masters restart empty
// one at a time, each as soon as every master votes again. Nothing
// re-creates a tail, so before issue 18 the first master voted again after
// one lease without it, and after the second's quarantine the two empty
// masters granted the name while the delay still stood. Now a master that
// lost its data sits out the tails the others keep (quorum/gate.go).
func TestBreaker18TailOutlivesRestartsOfTwoMastersAfterTheHold(t *testing.T) {
	t.Parallel() // see TestMain
	const delay = 8 * time.Second
	for _, tc := range []struct{ name, lock, end string }{
		{"delay, session closed", "delay=" + delay.String(), "close"},
		{"min_hold, UNLOCK", "min_hold=" + delay.String(), "unlock"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b, servers := twoAgents(t, time.Second)
			holder, other := agenttest.Dial(t, a.Config.Socket.Path), agenttest.Dial(t, b.Config.Socket.Path)
			granted := time.Now() // min_hold runs from the grant, later
			if r := holder.Do("LOCK br/after " + tc.lock); r.Kind != "OK" {
				t.Fatal(r.Line)
			}
			servers[0].Restart()
			other.AwaitMasters("quarantined", 1)
			end := time.Now()
			if tc.end == "close" {
				holder.Close()
			} else if r := holder.Do("UNLOCK br/after"); r.Kind != "OK" {
				t.Fatal(r.Line)
			} else {
				end = granted
			}
			lockagenttest.Eventually(t, 5*time.Second, func() bool { return servers[1].Keys("lock-agent:{br/after}:h:*!") == 1 },
				"the hold never became a tail")
			expectTailThroughRestarts(t, other, servers, "br/after", end, delay)
		})
	}
}

// TestBreaker18DeadAgentsTailOutlivesRestartsOfTwoMasters: the holder's
// agent dies (its links to every master are cut at once: to the masters
// that is a crash, and it can end nothing), so nobody alive knows its
// tail; the masters then restart empty one at a time, each as soon as
// every master votes again. The dead agent's record becomes a tail when
// its lease runs out, and must keep the name for the delay after it.
func TestBreaker18DeadAgentsTailOutlivesRestartsOfTwoMasters(t *testing.T) {
	t.Parallel() // see TestMain
	const lease, delay = time.Second, 8 * time.Second
	servers := redistest.Start(t, 3)
	cfg, links := proxiedConfig(t, servers, lease)
	a, b := agenttest.Start(t, cfg), agenttest.Start(t, agenttest.Config(t, servers, lease))
	holder, other := agenttest.Dial(t, a.Config.Socket.Path), agenttest.Dial(t, b.Config.Socket.Path)
	if r := holder.Do("LOCK br/dead delay=" + delay.String()); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	for _, l := range links {
		l.SetMode(faultproxy.Cut)
	}
	end := time.Now() // its record lives on for up to a lease: the tail ends later still
	expectTailThroughRestarts(t, other, servers, "br/dead", end, delay)
}

// expectTailThroughRestarts checks, on other's agent, that name stays
// unavailable until delay after end while the masters restart empty one at
// a time (at most one is restarting or quarantined at any moment: a fault
// a majority survives), each as soon as all of them vote again; and that
// it is granted once the tail and the quarantines are over.
func expectTailThroughRestarts(t *testing.T, other *agenttest.Conn, servers []*redistest.Server, name string, end time.Time, delay time.Duration) {
	t.Helper()
	const margin = 300 * time.Millisecond // the tail ends on the masters' clocks, after end
	restarts, next := 0, 1
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	for time.Since(end) < delay-margin {
		if r := other.Do("LOCK " + name + " wait=0"); r.Kind == "OK" {
			t.Fatalf("LOCK wait=0 %v after an end with delay=%v, after %d master restarts one at a time: %q, want no grant",
				time.Since(end), delay, restarts, r.Line)
		}
		if mastersUp(other) == len(servers) {
			servers[next].Restart()
			other.AwaitMasters("quarantined", 1)
			restarts, next = restarts+1, (next+1)%len(servers)
		}
		<-poll.C
	}
	t.Logf("%s: no grant during the delay, %d master restarts", name, restarts)
	r := other.Do("LOCK " + name + " wait=30s")
	if r.Kind != "OK" {
		t.Fatalf("LOCK after the delay: %q", r.Line)
	}
	t.Logf("%s granted %v after the end, delay=%v", name, time.Since(end), delay)
}

// mastersUp is how many masters c's agent counts as up.
func mastersUp(c *agenttest.Conn) int {
	up := 0
	for _, d := range c.Do("STATUS").Data {
		if d["state"] == "up" {
			up++
		}
	}
	return up
}

// drainPushes is every push c has received and not yet read.
func drainPushes(c *agenttest.Conn) []string {
	var out []string
	for {
		select {
		case p := <-c.Pushes():
			out = append(out, p)
		default:
			return out
		}
	}
}
