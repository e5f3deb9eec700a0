package tests

import (
	"fmt"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/agenttest"
)

// TestBreaker19DowngradeOfALentHold: a lent exclusive hold taken shared
// too, then downgraded (UNLOCK mode=exclusive) at once, before the
// keeper's retag of the lent holder lands: the masters' record must end
// shared (a reader on the other agent is granted), and once the lent hold
// ends, the caching agent lends nothing an exclusive LOCK could take
// while that reader holds the name.
//
// Each round has a name of its own. A name another agent waited for is
// not cached for ten lingers (see Agent.shared): on a busy host the
// remote reader of one round can find the record still exclusive and
// wait, its waiting record then outlives its grant by up to a write's
// pace, and the next round's release found it and gave the name up
// instead of caching it (seen beside two CPU hogs: WHO without cached=
// for five seconds).
func TestBreaker19DowngradeOfALentHold(t *testing.T) {
	a, b, _ := twoAgents(t, 3*time.Second)
	ca, cb := agenttest.Dial(t, a.Config.Socket.Path), agenttest.Dial(t, b.Config.Socket.Path)
	for i := range 10 {
		name := fmt.Sprintf("dg19/%d", i)
		cacheIt(t, ca, "LOCK "+name+" wait=5s")
		awaitCachedWho(t, cb, name, "host-a", 0)
		// Pipelined: the downgrade goes out right after the lending.
		_, lentR := ca.Send("LOCK " + name + " wait=0")
		_, readR := ca.Send("LOCK " + name + " mode=shared wait=0")
		_, downR := ca.Send("UNLOCK " + name + " mode=exclusive")
		if r := ca.Await(lentR); r.Kind != "OK" {
			t.Fatalf("round %d: lent: %s", i, r.Line)
		}
		ca.Await(readR)
		if r := ca.Await(downR); r.Kind != "OK" {
			t.Fatalf("round %d: downgrade: %s", i, r.Line)
		}
		if r := cb.Do("LOCK " + name + " mode=shared wait=3s"); r.Kind != "OK" {
			t.Fatalf("round %d: a remote reader after the lent hold was downgraded: %s; WHO %s", i, r.Line, cb.Do("WHO "+name).Line)
		}
		if r := ca.Do("UNLOCK " + name); r.Kind != "OK" {
			t.Fatal(r.Line)
		}
		if r := ca.Do("LOCK " + name + " wait=0"); r.Kind != "BUSY" {
			t.Fatalf("round %d: a local writer while a remote reader holds the name: %s", i, r.Line)
		}
		cb.Do("UNLOCK " + name)
	}
}
