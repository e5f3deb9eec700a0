package tests

import (
	"strings"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/faultproxy"
)

// TestBreaker19ACutOffCacheTellsItsLentHolderFirst: the caching agent is
// cut off from every master (black holes: its requests hang) while its
// client holds a lent name. The client must be told LOST before a client
// of the other agent is granted the name, with a higher fence; for each
// kind of cut.
func TestBreaker19ACutOffCacheTellsItsLentHolderFirst(t *testing.T) {
	for _, mode := range []faultproxy.Mode{faultproxy.BlackHole, faultproxy.Cut, faultproxy.BlackHoleToClient} {
		t.Run(mode.String(), func(t *testing.T) {
			c := newPartitionCluster(t, time.Second, time.Second)
			ca := agenttest.Dial(t, c.agents[0].Config.Socket.Path)
			cb := agenttest.Dial(t, c.agents[1].Config.Socket.Path)
			first := cacheIt(t, ca, "LOCK cut19")
			awaitCachedWho(t, cb, "cut19", "host-0", 0)
			lent := ca.Do("LOCK cut19 wait=0")
			if lent.Kind != "OK" || lent.Int("fence") <= first.Int("fence") {
				t.Fatalf("lent: %s", lent.Line)
			}
			for _, p := range c.links[0] {
				p.SetMode(mode)
			}
			_, granted := cb.Send("LOCK cut19 wait=10s")
			lost := make(chan time.Time, 1)
			go func() {
				p := ca.Push(10 * time.Second)
				if !strings.HasPrefix(p, "* LOST cut19 ") {
					t.Errorf("push %q, want LOST", p)
				}
				lost <- time.Now()
			}()
			r := cb.Await(granted)
			grantedAt := time.Now()
			if r.Kind != "OK" || r.Int("fence") <= lent.Int("fence") {
				t.Fatalf("the other agent's LOCK: %s, want a fence above the lent %d", r.Line, lent.Int("fence"))
			}
			if at := <-lost; at.After(grantedAt) {
				t.Fatalf("the lent holder heard LOST %v after the other agent was granted", at.Sub(grantedAt))
			}
			cb.Do("UNLOCK cut19")
		})
	}
}

// TestBreaker19ACutOffCacheLendsNothingStale: a name cached by an agent
// then cut off from every master: once its record's validity fell below
// half a lease, a local LOCK is not lent it (it must go to the masters,
// which it cannot reach: BUSY), and the other agent is granted the name.
func TestBreaker19ACutOffCacheLendsNothingStale(t *testing.T) {
	c := newPartitionCluster(t, time.Second, time.Second)
	ca := agenttest.Dial(t, c.agents[0].Config.Socket.Path)
	cb := agenttest.Dial(t, c.agents[1].Config.Socket.Path)
	first := cacheIt(t, ca, "LOCK stale19")
	awaitCachedWho(t, cb, "stale19", "host-0", 0)
	for _, p := range c.links[0] {
		p.SetMode(faultproxy.BlackHole)
	}
	cut := time.Now()
	// Past half a lease since the cut, so since the last renewal that
	// landed: the record is valid for less than half a lease.
	<-time.After(600 * time.Millisecond)
	if l := ca.Do("LOCK stale19 wait=0"); l.Kind == "OK" {
		t.Fatalf("a cut-off agent lent a record valid for under half a lease, %v after the cut: %s", time.Since(cut), l.Line)
	}
	_, granted := cb.Send("LOCK stale19 wait=10s")
	r := cb.Await(granted)
	if r.Kind != "OK" || r.Int("fence") <= first.Int("fence") {
		t.Fatalf("the other agent's LOCK: %s", r.Line)
	}
	t.Logf("granted to the other agent %v after the cut", time.Since(cut))
	if l := ca.Do("LOCK stale19 wait=0"); l.Kind == "OK" {
		t.Fatalf("a cut-off agent lent a name another agent holds: %s", l.Line)
	}
	cb.Do("UNLOCK stale19")
}
