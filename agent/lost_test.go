package agent_test

import (
	"strings"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/agenttest"
)

// TestALostHoldIsNotGrantedBeforeItsValidityEnds: the LOST of a ttl= hold
// goes out a lead before its validity ends, so that the client hears of it
// before anyone else can be granted the name; the name stays the holder's
// in the masters until then. Another client asking all along is granted it
// only once the validity the holder was told (counted from before its LOCK
// was sent) has ended.
func TestALostHoldIsNotGrantedBeforeItsValidityEnds(t *testing.T) {
	a, _ := start(t, nil)
	holder, other := agenttest.Dial(t, a.SocketPath()), agenttest.Dial(t, a.SocketPath())
	sent := time.Now()
	r := holder.Do("LOCK x ttl=2s") // a lead of 40ms
	if r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	validUntil := sent.Add(time.Duration(r.Int("validity")) * time.Millisecond)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		r := other.Do("LOCK x wait=0")
		if r.Kind == "OK" {
			if early := validUntil.Sub(time.Now()); early > 0 {
				t.Fatalf("granted %v before the holder's validity ended", early)
			}
			break
		}
		if r.Kind != "BUSY" && r.Code != "NO_QUORUM" { // masters slow to answer on a busy host
			t.Fatal(r.Line)
		}
		if time.Now().After(deadline) {
			t.Fatal("never granted after the ttl= hold ended")
		}
	}
	if p := holder.Push(5 * time.Second); !strings.HasPrefix(p, "* LOST x ") || !strings.Contains(p, "reason=expired") {
		t.Fatalf("the holder heard %q", p)
	}
}

// TestAnExpiredHoldsNameIsFreeOnceItsLOSTIsRead: a ttl= hold that ran out is
// told LOST where its validity ends, and given back to the masters then; a
// LOCK wait=0 of the name sent the moment the LOST is read is granted, as
// Redisson's tryLock after a lease ran out is (RedissonContractTest). The
// give-back ran in the background after the push, so the LOCK's round
// could reach the masters first and be answered BUSY for a name no one
// held any more.
func TestAnExpiredHoldsNameIsFreeOnceItsLOSTIsRead(t *testing.T) {
	a, _ := start(t, nil)
	c := agenttest.Dial(t, a.SocketPath())
	for i := range 40 {
		if r := c.Do("LOCK x ttl=50ms"); r.Kind != "OK" {
			t.Fatalf("cycle %d: %s", i, r.Line)
		}
		if p := c.Push(5 * time.Second); !strings.HasPrefix(p, "* LOST x ") || !strings.Contains(p, "reason=expired") {
			t.Fatalf("cycle %d: the holder heard %q", i, p)
		}
		if r := c.Do("LOCK x wait=0"); r.Kind != "OK" {
			t.Fatalf("cycle %d: LOCK wait=0 right after the expired hold's LOST: %s", i, r.Line)
		}
		if r := c.Do("UNLOCK x"); r.Kind != "OK" {
			t.Fatalf("cycle %d: %s", i, r.Line)
		}
	}
}
