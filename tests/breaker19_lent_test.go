package tests

import (
	"fmt"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/agenttest"
)

// TestBreaker19ChangedLentHoldsAreNotCachedAgain: a lent hold that was
// EXTENDed, or given a value (SET), is released when it ends, not cached
// again: the other agent's wait=0 LOCK is granted at once and a wait=0
// LOCK on the caching agent meanwhile is BUSY. CHECK of the lent fence
// on its agent is current while it is held, and not once it ended.
func TestBreaker19ChangedLentHoldsAreNotCachedAgain(t *testing.T) {
	a, b, _ := twoCachingAgents(t, 3*time.Second, time.Minute)
	for _, change := range []string{"EXTEND %s ttl=5s", "SET %s value=v1"} {
		ca, cb := agenttest.Dial(t, a.Config.Socket.Path), agenttest.Dial(t, b.Config.Socket.Path)
		name := "chg19-" + change[:3]
		cacheIt(t, ca, "LOCK "+name)
		awaitCachedWho(t, cb, name, "host-a", 0)
		if r := cb.Do("CHECK " + name + " fence=1"); r.Fields["current"] == "true" {
			t.Fatalf("CHECK of a wrong fence: %s", r.Line)
		}
		lent := ca.Do("LOCK " + name + " wait=0")
		if lent.Kind != "OK" {
			t.Fatal(lent.Line)
		}
		if r := ca.Do("CHECK " + name + " fence=" + lent.Fields["fence"]); r.Fields["current"] != "true" {
			t.Fatalf("CHECK of the lent fence on its agent: %s", r.Line)
		}
		if r := ca.Do(fmt.Sprintf(change, name)); r.Kind != "OK" {
			t.Fatalf("%s: %s", change, r.Line)
		}
		ca.Do("UNLOCK " + name)
		if r := ca.Do("CHECK " + name + " fence=" + lent.Fields["fence"]); r.Fields["current"] == "true" {
			t.Fatalf("CHECK of an ended lent fence: %s", r.Line)
		}
		start := time.Now()
		r := cb.Do("LOCK " + name + " wait=0")
		if r.Kind != "OK" || r.Int("fence") <= lent.Int("fence") {
			t.Fatalf("after a lent hold changed by %q ended: %s", change, r.Line)
		}
		t.Logf("%q: the other agent granted in %v", change, time.Since(start))
		if l := ca.Do("LOCK " + name + " wait=0"); l.Kind != "BUSY" {
			t.Fatalf("after %q, the caching agent lent a name the other agent holds: %s", change, l.Line)
		}
	}
}
