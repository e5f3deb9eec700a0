package tests

import (
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/agenttest"
)

// awaitCachedWho waits until WHO name on c answers with want as its cached=
// field ("" for none) and n= holders, or fails t after a second.
func awaitCachedWho(t *testing.T, c *agenttest.Conn, name, cached string, n int64) agenttest.Reply {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for {
		r := c.Do("WHO " + name)
		if r.Fields["cached"] == cached && r.Int("n") == n {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("WHO %s: %q, want cached=%q n=%d", name, r.Line, cached, n)
		}
		time.Sleep(2 * time.Millisecond) // the mark lands in the background: poll WHO, the thing under test
	}
}

// TestACachedNameIsLentLocallyAndWhoTellsIt: after its last holder lets
// go, a name stays cached on its agent (WHO: cached=, no holder); the next
// LOCK there is answered from the cache with a higher fence, and WHO then
// names its holder again.
func TestACachedNameIsLentLocallyAndWhoTellsIt(t *testing.T) {
	a, b, _ := twoAgents(t, 3*time.Second)
	c := agenttest.Dial(t, a.Config.Socket.Path)
	other := agenttest.Dial(t, b.Config.Socket.Path)
	first := c.Do("LOCK cached")
	if first.Kind != "OK" {
		t.Fatal(first.Line)
	}
	c.Do("UNLOCK cached")
	awaitCachedWho(t, other, "cached", "host-a", 0)
	before := metric(t, a, "lock_agent_cached_grants_total")
	fences := []int64{first.Int("fence")}
	for range 50 {
		r := c.Do("LOCK cached")
		if r.Kind != "OK" {
			t.Fatal(r.Line)
		}
		fences = append(fences, r.Int("fence"))
		c.Do("UNLOCK cached")
	}
	for i := 1; i < len(fences); i++ {
		if fences[i] <= fences[i-1] {
			t.Fatalf("fence %d after %d: %v", fences[i], fences[i-1], fences)
		}
	}
	if got := metric(t, a, "lock_agent_cached_grants_total") - before; got != 50 {
		t.Fatalf("%v of 50 LOCKs were answered from the cache", got)
	}
	held := c.Do("LOCK cached")
	r := awaitCachedWho(t, other, "cached", "", 1)
	if len(r.Data) != 1 || r.Data[0]["fence"] != held.Fields["fence"] {
		t.Fatalf("WHO of a lent name: %q %v, want its holder's fence %s", r.Line, r.Data, held.Fields["fence"])
	}
	c.Do("UNLOCK cached")
}
