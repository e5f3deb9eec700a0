package tests

import (
	"strings"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/agenttest"
)

// TestBreaker19MajorityFlushedUnderACache: a name cached on one agent;
// a majority of masters is flushed (FLUSHALL: they lose the record, and
// their epoch marker); the caching agent's client LOCKs it at once (lent
// or not) while a client of the other agent waits for it. If the first
// was granted, it must hear LOST before the second is granted, and the
// second's fence is above it.
func TestBreaker19MajorityFlushedUnderACache(t *testing.T) {
	for round := range 3 {
		a, b, servers := twoAgents(t, time.Second)
		ca, cb := agenttest.Dial(t, a.Config.Socket.Path), agenttest.Dial(t, b.Config.Socket.Path)
		first := cacheIt(t, ca, "LOCK fl19")
		awaitCachedWho(t, cb, "fl19", "host-a", 0)
		servers[round%3].Do("FLUSHALL")
		servers[(round+1)%3].Do("FLUSHALL")
		local := ca.Do("LOCK fl19 wait=0")
		_, granted := cb.Send("LOCK fl19 wait=15s")
		lost := make(chan time.Time, 1)
		if local.Kind == "OK" {
			go func() {
				p := ca.Push(15 * time.Second)
				if !strings.HasPrefix(p, "* LOST fl19 ") {
					t.Errorf("push %q, want LOST", p)
				}
				lost <- time.Now()
			}()
		}
		r := cb.Await(granted)
		at := time.Now()
		if r.Kind != "OK" || r.Int("fence") <= first.Int("fence") || local.Kind == "OK" && r.Int("fence") <= local.Int("fence") {
			t.Fatalf("round %d: the other agent: %s; cached fence %d, local LOCK %s", round, r.Line, first.Int("fence"), local.Line)
		}
		if local.Kind == "OK" {
			if l := <-lost; l.After(at) {
				t.Fatalf("round %d: the local holder (%s) heard LOST %v after the other agent was granted", round, local.Line, l.Sub(at))
			}
		}
		t.Logf("round %d: local LOCK %s; remote %s", round, local.Line, r.Line)
	}
}
