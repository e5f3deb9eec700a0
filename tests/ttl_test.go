package tests

import (
	"strings"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/agent"
	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// TestATTLHoldOutlivesAMasterRestart: a ttl= hold four leases long is
// renewed like a watchdog hold, so it outlives a master that restarts
// empty; that master sits out one lease (plus drift and margins), not the
// ttl or max_ttl, and votes again while the hold still lives, and the hold
// ends with LOST reason=expired at its ttl, when the contenders get it.
func TestATTLHoldOutlivesAMasterRestart(t *testing.T) {
	const lease, ttl = time.Second, 4 * time.Second
	a, b, servers := twoAgents(t, lease)
	holder := agenttest.Dial(t, a.Config.Socket.Path)
	sent := time.Now()
	r := holder.Do("LOCK k ttl=" + ttl.String())
	if r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	if v := time.Duration(r.Int("validity")) * time.Millisecond; v > lease {
		t.Fatalf("validity %v: a ttl= hold is known valid for its lease (renewed), not its ttl", v)
	}
	servers[1].Restart() // empty
	restarted := time.Now()
	watcher := agenttest.Dial(t, b.Config.Socket.Path)
	left := quarantineLeft(t, watcher, "m1")
	watcher.AwaitMastersWithin(3*time.Second, "up", 3)
	back := time.Since(restarted)
	t.Logf("m1 restarted empty: quarantine_left=%v when first seen, votes again %v after the restart (STATUS, probed every 200ms); agent.Quarantine = %v",
		left, back.Round(time.Millisecond), agent.Quarantine(a.Config.Lock))
	if want := agent.Quarantine(a.Config.Lock); left > want {
		t.Errorf("m1 sits out %v, want one quarantine of %v", left, want)
	}
	if time.Since(sent) >= ttl {
		t.Fatalf("the machine is too slow for this test: the hold's ttl ran out before m1 voted again")
	}
	cs := contend(t, "k", b.Config.Socket.Path, b.Config.Socket.Path)
	p := holder.Push(ttl + time.Second)
	heard := time.Since(sent)
	if !strings.HasPrefix(p, "* LOST k ") || !strings.Contains(p, "reason=expired") || heard < ttl {
		t.Fatalf("holder heard %q %v after its LOCK was sent, want LOST reason=expired at its ttl %v", p, heard, ttl)
	}
	t.Logf("holder heard %q %v after its LOCK was sent", p, heard.Round(time.Millisecond))
	cs.check(t, sent.Add(ttl), r.Int("fence"))
}

// TestAMasterRestartCostsOneLease measures what a restart of a master
// costs with the default settings (lease 15s, drift_factor 0.01,
// master_timeout 50ms): how long it sits out before it votes again. It is
// the figure docs/operations.md gives.
func TestAMasterRestartCostsOneLease(t *testing.T) {
	t.Parallel() // it waits out 15s; what it asserts (left ≤ Quarantine ≤ back) no host speed can break
	if testing.Short() {
		t.Skip("waits out a 15s quarantine")
	}
	servers := redistest.Start(t, 3)
	cfg := agenttest.Config(t, servers, agent.Default().Lock.Lease)
	a := agenttest.Start(t, cfg)
	c := agenttest.Dial(t, a.Config.Socket.Path)
	if r := c.Do("LOCK k"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	servers[1].Restart()
	restarted := time.Now()
	left := quarantineLeft(t, c, "m1")
	c.AwaitMastersWithin(30*time.Second, "up", 3)
	back := time.Since(restarted)
	want := agent.Quarantine(cfg.Lock)
	t.Logf("lease %v: m1 restarted empty, quarantine_left=%v when first seen, votes again %v after the restart (STATUS, probed every 200ms); agent.Quarantine = %v",
		cfg.Lock.Lease, left, back.Round(time.Millisecond), want)
	if left > want || back < left {
		t.Errorf("m1 sat out %v (%v left when first seen), want agent.Quarantine %v", back, left, want)
	}
	if h := c.Do("HOLDS"); h.Int("n") != 1 {
		t.Errorf("the hold did not outlive the restart of one master: %+v", h.Data)
	}
}

// quarantineLeft waits until c's agent shows master quarantined and
// returns how long it has left then.
func quarantineLeft(t *testing.T, c *agenttest.Conn, master string) time.Duration {
	t.Helper()
	var left time.Duration
	lockagenttest.Eventually(t, 5*time.Second, func() bool {
		for _, d := range c.Do("STATUS").Data {
			if d["master"] == master && d["state"] == "quarantined" {
				left = time.Duration(atoiOr(d["quarantine_left"])) * time.Millisecond
				return true
			}
		}
		return false
	}, "%s never quarantined", master)
	return left
}
