package tests

import (
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/agenttest"
)

// TestBreaker19AWaiterElsewhereWhileLent: with a long linger (1m), a
// client of the other agent waits while the name is lent; when the lent
// holder lets go, the name goes to that waiter at once (not after the
// linger), with a higher fence, and the caching agent lends it no more.
// Its wait=0 LOCK meanwhile is BUSY, and a session that closes while
// holding a lent name gives it to the waiter as well.
func TestBreaker19AWaiterElsewhereWhileLent(t *testing.T) {
	a, b, _ := twoCachingAgents(t, 3*time.Second, time.Minute)
	for i, closeIt := range []bool{false, true} {
		ca, cb := agenttest.Dial(t, a.Config.Socket.Path), agenttest.Dial(t, b.Config.Socket.Path)
		name := "wl19-" + string(rune('a'+i))
		cacheIt(t, ca, "LOCK "+name)
		awaitCachedWho(t, cb, name, "host-a", 0)
		lent := ca.Do("LOCK " + name + " wait=0")
		if lent.Kind != "OK" {
			t.Fatal(lent.Line)
		}
		_, granted := cb.Send("LOCK " + name + " wait=10s")
		cb.AwaitWaiters(1)
		start := time.Now()
		if closeIt {
			ca.Close()
		} else {
			ca.Do("UNLOCK " + name)
		}
		r := cb.Await(granted)
		took := time.Since(start)
		if r.Kind != "OK" || r.Int("fence") <= lent.Int("fence") {
			t.Fatalf("the waiter elsewhere: %s, want a fence above %d", r.Line, lent.Int("fence"))
		}
		if took > 2*time.Second {
			t.Fatalf("the waiter elsewhere was granted %v after the lent holder let go", took)
		}
		t.Logf("close=%v: granted elsewhere %v after the lent holder let go", closeIt, took)
		other := agenttest.Dial(t, a.Config.Socket.Path)
		if l := other.Do("LOCK " + name + " wait=0"); l.Kind != "BUSY" {
			t.Fatalf("the caching agent lent a name the other agent holds: %s", l.Line)
		}
	}
}
