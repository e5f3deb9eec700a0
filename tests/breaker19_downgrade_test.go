package tests

import (
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
func TestBreaker19DowngradeOfALentHold(t *testing.T) {
	a, b, _ := twoAgents(t, 3*time.Second)
	ca, cb := agenttest.Dial(t, a.Config.Socket.Path), agenttest.Dial(t, b.Config.Socket.Path)
	for i := range 10 {
		cacheIt(t, ca, "LOCK dg19 wait=5s")
		awaitCachedWho(t, cb, "dg19", "host-a", 0)
		// Pipelined: the downgrade goes out right after the lending.
		_, lentR := ca.Send("LOCK dg19 wait=0")
		_, readR := ca.Send("LOCK dg19 mode=shared wait=0")
		_, downR := ca.Send("UNLOCK dg19 mode=exclusive")
		if r := ca.Await(lentR); r.Kind != "OK" {
			t.Fatalf("round %d: lent: %s", i, r.Line)
		}
		ca.Await(readR)
		if r := ca.Await(downR); r.Kind != "OK" {
			t.Fatalf("round %d: downgrade: %s", i, r.Line)
		}
		if r := cb.Do("LOCK dg19 mode=shared wait=3s"); r.Kind != "OK" {
			t.Fatalf("round %d: a remote reader after the lent hold was downgraded: %s; WHO %s", i, r.Line, cb.Do("WHO dg19").Line)
		}
		if r := ca.Do("UNLOCK dg19"); r.Kind != "OK" {
			t.Fatal(r.Line)
		}
		if r := ca.Do("LOCK dg19 wait=0"); r.Kind != "BUSY" {
			t.Fatalf("round %d: a local writer while a remote reader holds the name: %s", i, r.Line)
		}
		cb.Do("UNLOCK dg19")
	}
}
