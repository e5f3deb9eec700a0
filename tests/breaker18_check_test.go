package tests

import (
	"strconv"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/agenttest"
)

// TestBreaker18CheckAfterHandOversWithAMasterPaused: a name passed among
// one agent's local holders (lock cohorting) while one master of three is
// paused. docs/protocol.md promises that CHECK answers for the current
// holder within 10ms of a hand-over; a holder that UNLOCKed (and whose
// fence is then no longer current) must not be CHECKed current for much
// longer than that, paused master or not.
func TestBreaker18CheckAfterHandOversWithAMasterPaused(t *testing.T) {
	// A lease of 3s: a hold is passed on only with half a lease of validity
	// left (lend.go), and with a lease of 1s a renewal late by a few
	// hundred milliseconds on a loaded host (with one master paused, the
	// other two must both answer it) had a holder release the name instead.
	a, b, servers := twoAgents(t, 3*time.Second)
	grants := mastersGrants(t, servers[0], a.Config.Lock.KeyPrefix, "hc") // m0 is in every majority while m2 is paused
	first := agenttest.Dial(t, a.Config.Socket.Path)
	if r := first.Do("LOCK hc"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	next := make([]*agenttest.Conn, 3)
	granted := make([]<-chan agenttest.Reply, 3)
	for i := range next {
		next[i] = agenttest.Dial(t, a.Config.Socket.Path)
		_, granted[i] = next[i].Send("LOCK hc wait=10s")
		first.AwaitWaiters(int64(i + 1))
	}
	servers[2].Pause()
	first.AwaitMasters("down", 1)
	if r := first.Do("UNLOCK hc"); r.Kind != "OK" {
		var pushed []string
		for len(first.Pushes()) > 0 {
			pushed = append(pushed, <-first.Pushes())
		}
		t.Fatalf("%s (pushed: %q)", r.Line, pushed)
	}
	checker := agenttest.Dial(t, b.Config.Socket.Path)
	var fences [3]int64
	for i, c := range next {
		r := c.Await(granted[i])
		if r.Kind != "OK" {
			t.Fatalf("holder %d: %q", i, r.Line)
		}
		fences[i] = r.Int("fence")
		if i == len(next)-1 {
			break
		}
		if r := c.Do("UNLOCK hc"); r.Kind != "OK" { // passes it on to the next
			t.Fatal(r.Line)
		}
	}
	unlocked := time.Now()
	fromMasters := grants()
	t.Logf("fences %v; granted by the masters: %v", fences, fromMasters)
	if fences[2] != fences[1]+1 || fences[1] != fences[0]+1 {
		t.Fatalf("fences %v: the name was not passed among the local holders", fences)
	}
	for {
		r := checker.Do("CHECK hc fence=" + strconv.FormatInt(fences[1], 10))
		if r.Kind != "OK" {
			t.Fatal(r.Line)
		}
		stale := time.Since(unlocked)
		if r.Fields["current"] == "false" {
			t.Logf("the holder before was CHECKed current for %v after its UNLOCK", stale)
			break
		}
		if stale > 100*time.Millisecond {
			t.Fatalf("fence %d CHECKed current %v after its holder's UNLOCK passed the name on (fence %d is the holder's)", fences[1], stale, fences[2])
		}
	}
	// The current holder's fence is current once its retag landed on a
	// majority: the two masters up take it one after the other, so right
	// after fences[1] stopped being current it may not be yet.
	for {
		r := checker.Do("CHECK hc fence=" + strconv.FormatInt(fences[2], 10))
		if r.Fields["current"] == "true" {
			break
		}
		if time.Since(unlocked) > 100*time.Millisecond {
			t.Fatalf("the current holder's fence %d: %q %v after the last hand-over", fences[2], r.Line, time.Since(unlocked))
		}
	}
}
