package tests

import (
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// TestWhoBetweenTwoOwnersLocksDoesNotDeadlock: one connection pipelines
//
//	1 LOCK x owner=a wait=forever
//	2 LOCK x owner=b wait=forever
//	3 WHO x
//	4 UNLOCK x owner=a
//
// while another connection holds x. Without line 3 this is: a gets x once
// the other lets go, a unlocks, b gets x. With it, the WHO waits for LOCK
// 2 (every unanswered LOCK of x on the connection), LOCK 2 waits for a's
// hold to end, and a's UNLOCK waits for the WHO (it is the last request on
// hold (x, a), which the WHO waited for): nothing is ever answered.
func TestWhoBetweenTwoOwnersLocksDoesNotDeadlock(t *testing.T) {
	servers := redistest.Start(t, 3)
	a := agenttest.Start(t, agenttest.Config(t, servers, time.Second))
	other := agenttest.Dial(t, a.Config.Socket.Path)
	if r := other.Do("LOCK x"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	c := agenttest.Dial(t, a.Config.Socket.Path)
	_, lockA := c.Send("LOCK x owner=a wait=forever")
	_, lockB := c.Send("LOCK x owner=b wait=forever")
	_, who := c.Send("WHO x")
	_, unlockA := c.Send("UNLOCK x owner=a")
	other.AwaitWaiters(2)
	other.Do("UNLOCK x")
	for _, step := range []struct {
		name string
		ch   <-chan agenttest.Reply
	}{{"LOCK a", lockA}, {"UNLOCK a", unlockA}, {"LOCK b", lockB}, {"WHO", who}} {
		select {
		case r := <-step.ch:
			if r.Kind != "OK" {
				t.Errorf("%s: %s", step.name, r.Line)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no answer in 5s: the connection's requests wait for each other", step.name)
		}
	}
}
