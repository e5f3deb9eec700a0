package tests

import (
	"strings"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/agenttest"
)

// TestReadersTogetherWritersAlone: shared holders on two agents at once; a
// writer waits for both; a reader waits for the writer; fences grow.
func TestReadersTogetherWritersAlone(t *testing.T) {
	a, b, _ := twoAgents(t, 3*time.Second)
	r1, r2 := agenttest.Dial(t, a.Config.Socket.Path), agenttest.Dial(t, b.Config.Socket.Path)
	w := agenttest.Dial(t, b.Config.Socket.Path)
	g1, g2 := r1.Do("LOCK rw mode=shared"), r2.Do("LOCK rw mode=shared")
	if g1.Kind != "OK" || g2.Kind != "OK" {
		t.Fatalf("two readers on two agents: %s / %s", g1.Line, g2.Line)
	}
	if r := w.Do("LOCK rw wait=0"); r.Kind != "BUSY" {
		t.Fatalf("a writer while readers hold: %s", r.Line)
	}
	_, wch := w.Send("LOCK rw wait=5s")
	w.AwaitWaiters(1)
	r1.Do("UNLOCK rw")
	select {
	case r := <-wch:
		t.Fatalf("the writer was granted with a reader left: %s", r.Line)
	case <-time.After(200 * time.Millisecond):
	}
	r2.Do("UNLOCK rw")
	wg := w.Await(wch)
	if wg.Kind != "OK" || wg.Int("fence") <= max(g1.Int("fence"), g2.Int("fence")) {
		t.Fatalf("writer after the readers: %s (readers' fences %d, %d)", wg.Line, g1.Int("fence"), g2.Int("fence"))
	}
	if r := r1.Do("LOCK rw mode=shared wait=0"); r.Kind != "BUSY" {
		t.Fatalf("a reader while a writer holds: %s", r.Line)
	}
	_, rch := r1.Send("LOCK rw mode=shared wait=5s")
	r1.AwaitWaiters(1)
	start := time.Now()
	w.Do("UNLOCK rw")
	if r := r1.Await(rch); r.Kind != "OK" || r.Int("fence") <= wg.Int("fence") || time.Since(start) > 150*time.Millisecond {
		t.Fatalf("reader after the writer: %s after %v", r.Line, time.Since(start))
	}
}

// TestSharedReentryUpgradeAndDowngrade: the re-entry rules of one owner.
func TestSharedReentryUpgradeAndDowngrade(t *testing.T) {
	a, b, _ := twoAgents(t, 3*time.Second)
	c := agenttest.Dial(t, a.Config.Socket.Path)
	other := agenttest.Dial(t, b.Config.Socket.Path)

	if r := c.Do("LOCK up mode=shared"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	start := time.Now()
	if r := c.Do("LOCK up"); r.Code != "CONFLICT" || !strings.Contains(r.Line, "no upgrade") || time.Since(start) > 100*time.Millisecond {
		t.Fatalf("an upgrade: %s after %v", r.Line, time.Since(start))
	}
	if h := c.Do("HOLDS"); h.Data[0]["count"] != "1" || h.Data[0]["mode"] != "shared" {
		t.Fatalf("a refused upgrade changed the hold: %+v", h.Data)
	}
	c.Do("UNLOCK up")

	x := c.Do("LOCK dn")
	if r := c.Do("LOCK dn mode=shared"); r.Kind != "OK" || r.Int("count") != 2 || r.Int("fence") != x.Int("fence") {
		t.Fatalf("shared inside exclusive is a re-entry: %s", r.Line)
	}
	if h := c.Do("HOLDS"); h.Data[0]["mode"] != "exclusive" {
		t.Fatalf("the hold must stay exclusive: %+v", h.Data)
	}
	if r := other.Do("LOCK dn mode=shared wait=0"); r.Kind != "BUSY" {
		t.Fatalf("a reader elsewhere while exclusive: %s", r.Line)
	}
	_, rch := other.Send("LOCK dn mode=shared wait=5s")
	other.AwaitWaiters(1)
	if r := c.Do("UNLOCK dn mode=exclusive"); r.Kind != "OK" || r.Int("count") != 1 {
		t.Fatalf("downgrade: %s", r.Line)
	}
	if h := c.Do("HOLDS"); h.Data[0]["mode"] != "shared" || h.Data[0]["count"] != "1" {
		t.Fatalf("after the downgrade: %+v", h.Data)
	}
	if r := other.Await(rch); r.Kind != "OK" {
		t.Fatalf("a reader elsewhere after the downgrade: %s", r.Line)
	}
	if r := c.Do("UNLOCK dn mode=exclusive"); r.Code != "NOT_HELD" {
		t.Fatalf("a second downgrade: %s", r.Line)
	}
	if r := c.Do("UNLOCK dn"); r.Kind != "OK" || r.Int("count") != 0 {
		t.Fatal(r.Line)
	}
}

// TestSemaphoreSlots: limit=3 with five clients on two agents: exactly
// three granted, on slots 1, 2 and 3; a mismatched limit is a CONFLICT at
// once; a dead holder's slot goes to a waiter at once.
func TestSemaphoreSlots(t *testing.T) {
	a, b, _ := twoAgents(t, 3*time.Second)
	var conns []*agenttest.Conn
	slots := map[string]bool{}
	granted := 0
	for i := range 5 {
		agent := a
		if i%2 == 1 {
			agent = b
		}
		c := agenttest.Dial(t, agent.Config.Socket.Path)
		conns = append(conns, c)
		r := c.Do("LOCK sem limit=3 wait=0")
		switch r.Kind {
		case "OK":
			granted++
			if slots[r.Fields["slot"]] {
				t.Fatalf("slot %s granted twice", r.Fields["slot"])
			}
			slots[r.Fields["slot"]] = true
		case "BUSY":
		default:
			t.Fatal(r.Line)
		}
	}
	if granted != 3 || !slots["1"] || !slots["2"] || !slots["3"] {
		t.Fatalf("%d granted, slots %v", granted, slots)
	}
	c := conns[0]
	h := c.Do("HOLDS")
	if h.Data[0]["limit"] != "3" || h.Data[0]["slot"] == "" {
		t.Fatalf("HOLDS of a semaphore: %+v", h.Data)
	}
	if r := c.Do("LOCK sem limit=3"); r.Int("count") != 2 || r.Fields["slot"] != h.Data[0]["slot"] {
		t.Fatalf("re-entry keeps the slot: %s", r.Line)
	}
	c.Do("UNLOCK sem")
	if r := c.Do("WHO sem"); r.Int("n") != 3 || r.Data[0]["limit"] != "3" || r.Data[0]["slot"] == "" {
		t.Fatalf("WHO of a semaphore: %+v", r.Data)
	}
	late := agenttest.Dial(t, b.Config.Socket.Path)
	start := time.Now()
	if r := late.Do("LOCK sem limit=4 wait=5s"); r.Code != "CONFLICT" || !strings.Contains(r.Line, "limit=3") || time.Since(start) > 200*time.Millisecond {
		t.Fatalf("a mismatched limit: %s after %v", r.Line, time.Since(start))
	}
	if r := late.Do("LOCK sem wait=0"); r.Code != "CONFLICT" {
		t.Fatalf("a plain lock on a semaphore: %s", r.Line)
	}
	_, ch := late.Send("LOCK sem limit=3 wait=5s")
	late.AwaitWaiters(1)
	var holder *agenttest.Conn
	for _, c := range conns {
		if c.Do("HOLDS").Int("n") == 1 {
			holder = c
			break
		}
	}
	freed := holder.Do("HOLDS").Data[0]["slot"]
	start = time.Now()
	holder.Close() // the holder dies: its slot is released at once
	r := late.Await(ch)
	if r.Kind != "OK" || r.Fields["slot"] != freed || time.Since(start) > 300*time.Millisecond {
		t.Fatalf("waiter after a holder died: %s after %v (slot %s was freed)", r.Line, time.Since(start), freed)
	}
}
