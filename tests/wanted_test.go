package tests

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// awaitWanted waits (up to within) for the next push on c and fails unless
// it is a WANTED of name for owner; it returns the push.
func awaitWanted(t *testing.T, c *agenttest.Conn, name, owner string, within time.Duration) string {
	t.Helper()
	p := c.Push(within)
	if !strings.HasPrefix(p, "* WANTED "+name+" owner="+owner+" waiting=") {
		t.Fatalf("pushed %q, want * WANTED %s owner=%s waiting=N", p, name, owner)
	}
	return p
}

// quiet fails if c is pushed anything within d (what it checks is an
// absence, so it waits the whole of d).
func quiet(t *testing.T, c *agenttest.Conn, d time.Duration, why string) {
	t.Helper()
	if p := c.Push(d); p != "" {
		t.Fatalf("%s: pushed %q", why, p)
	}
}

// TestWantedReachesTheHolderFromTheOtherAgent: a notify=wanted holder on
// one agent is pushed WANTED when a request for the name starts waiting on
// the other agent, promptly (p50/p99 logged over 50 waits), once per wait
// (the waiter's repeated attempts push nothing more within 100 ms), not
// after the waiter left, and with a master paused too.
func TestWantedReachesTheHolderFromTheOtherAgent(t *testing.T) {
	a, b, servers := twoAgents(t, time.Second)
	holder := agenttest.Dial(t, a.Config.Socket.Path)
	waiter := agenttest.Dial(t, b.Config.Socket.Path)
	if r := holder.Do("LOCK w owner=o1 notify=wanted"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	// The first wait also finds the holder's agent subscribed: a message
	// before that is lost, and the waiter says it again within a lease.
	tag, ch := waiter.Send("LOCK w wait=30s")
	awaitWanted(t, holder, "w", "o1", 5*time.Second)
	cancelWait(t, waiter, tag, ch)

	var lat []time.Duration
	for range 50 {
		quietAfterLeft(t, holder) // and the holder's limiter allows the next
		start := time.Now()
		tag, ch := waiter.Send("LOCK w wait=30s")
		p := awaitWanted(t, holder, "w", "o1", 5*time.Second)
		lat = append(lat, time.Since(start))
		if !strings.HasSuffix(p, " waiting=1") {
			t.Fatalf("pushed %q, want waiting=1 (one request waits)", p)
		}
		cancelWait(t, waiter, tag, ch)
	}
	slices.Sort(lat)
	p50, p99 := lat[len(lat)/2], lat[len(lat)*99/100]
	t.Logf("waiter's LOCK sent on the other agent → WANTED read by the holder: p50 %v, p99 %v, max %v (n=%d)", p50, p99, lat[len(lat)-1], len(lat))
	if p99 > 500*time.Millisecond { // 10ms on an idle host; a loaded one is slower
		t.Fatalf("p99 %v from the wait to the WANTED", p99)
	}

	// A master paused: the message comes through the other two.
	servers[0].Pause()
	quiet(t, holder, 2*wantedEvery, "before the wait with a master paused")
	start := time.Now()
	tag, ch = waiter.Send("LOCK w wait=30s")
	awaitWanted(t, holder, "w", "o1", 5*time.Second)
	t.Logf("with a master paused: WANTED after %v", time.Since(start))
	cancelWait(t, waiter, tag, ch)
	servers[0].Resume()

	if r := holder.Do("UNLOCK w owner=o1"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
}

// quietAfterLeft is quiet after a waiter on the other agent left: but for
// one WANTED that it said while it still waited, which may still be on its
// way. A waiter says it waits after its first BUSY and again when it parks
// after an attempt, more than wantedEvery later on a busy host; the second
// can reach the holder's agent after the CANCEL's answer (seen beside two
// CPU hogs). A waiter that left and is still heard is heard again.
func quietAfterLeft(t *testing.T, c *agenttest.Conn) {
	t.Helper()
	if p := c.Push(2 * wantedEvery); p != "" {
		quiet(t, c, 2*wantedEvery, "after the waiter left, and a WANTED it said before ("+p+")")
	}
}

// wantedEvery is the agent's spacing of WANTED pushes to one hold.
const wantedEvery = 100 * time.Millisecond

// cancelWait cancels the waiting LOCK tag and reads its answer.
func cancelWait(t *testing.T, c *agenttest.Conn, tag string, ch <-chan agenttest.Reply) {
	t.Helper()
	if r := c.Do("CANCEL " + tag); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	if r := c.Await(ch); r.Code != "CANCELLED" {
		t.Fatalf("the cancelled LOCK: %s", r.Line)
	}
}

// TestWantedFromLocalWaitersSpacedAndCounted: local waiters push WANTED to
// a notify=wanted holder of their agent; waiters that come within 100 ms of
// a push push nothing more, and the next push counts every waiter, local
// and the other agent's. A holder that did not ask is pushed nothing.
func TestWantedFromLocalWaitersSpacedAndCounted(t *testing.T) {
	a, b, _ := twoAgents(t, time.Second)
	holder := agenttest.Dial(t, a.Config.Socket.Path)
	plain := agenttest.Dial(t, a.Config.Socket.Path)
	if r := holder.Do("LOCK w notify=wanted"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	if r := plain.Do("LOCK p"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	local := agenttest.Dial(t, a.Config.Socket.Path)
	local.Send("LOCK p wait=30s")
	start := time.Now() // the first push is made after this, so a second one no sooner than 100 ms after it
	local.Send("LOCK w wait=30s")
	if p := awaitWanted(t, holder, "w", "", 5*time.Second); !strings.HasSuffix(p, " waiting=1") {
		t.Fatalf("pushed %q, want waiting=1", p)
	}
	t.Logf("a local waiter's LOCK → WANTED: %v", time.Since(start))
	local.Send("LOCK w wait=30s owner=second")
	if p := holder.Push(3 * wantedEvery); p != "" && time.Since(start) < wantedEvery {
		t.Fatalf("a second WANTED within 100 ms of the first: %q", p)
	}
	other := agenttest.Dial(t, b.Config.Socket.Path)
	other.Send("LOCK w wait=30s")
	// The local waiters say again that they wait at each attempt: a push
	// of theirs may come first, counting 2.
	for p := awaitWanted(t, holder, "w", "", 5*time.Second); !strings.HasSuffix(p, " waiting=3"); {
		if !strings.HasSuffix(p, " waiting=2") {
			t.Fatalf("pushed %q, want waiting=3 (two local waiters, one on the other agent)", p)
		}
		p = awaitWanted(t, holder, "w", "", 5*time.Second)
	}
	quiet(t, plain, 2*wantedEvery, "a holder that did not ask for notify=wanted")
}

// TestWantedNotForACompatibleWaiter: a shared notify=wanted holder is not
// wanted by a shared request (granted beside it), on either agent, but is by
// an exclusive one; and notify=x is refused, holding nothing.
func TestWantedNotForACompatibleWaiter(t *testing.T) {
	a, b, _ := twoAgents(t, time.Second)
	holder := agenttest.Dial(t, a.Config.Socket.Path)
	if r := holder.Do("LOCK s mode=shared notify=x"); r.Code != "BAD_REQUEST" {
		t.Fatalf("notify=x: %s", r.Line)
	}
	if r := holder.Do("HOLDS"); r.Int("n") != 0 {
		t.Fatalf("a refused LOCK left a hold: %s", r.Line)
	}
	if r := holder.Do("LOCK s mode=shared notify=wanted"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	writer := agenttest.Dial(t, b.Config.Socket.Path)
	tag, ch := writer.Send("LOCK s wait=30s")
	awaitWanted(t, holder, "s", "", 5*time.Second)
	cancelWait(t, writer, tag, ch)
	quiet(t, holder, 2*wantedEvery, "after the writer left")
	for _, agent := range []*agenttest.Agent{a, b} {
		reader := agenttest.Dial(t, agent.Config.Socket.Path)
		if r := reader.Do("LOCK s mode=shared wait=5s"); r.Kind != "OK" {
			t.Fatal(r.Line)
		}
	}
	quiet(t, holder, 2*wantedEvery, "shared requests beside a shared holder")
	local := agenttest.Dial(t, a.Config.Socket.Path)
	local.Send("LOCK s wait=30s")
	awaitWanted(t, holder, "s", "", 5*time.Second)
}

// TestWantedTellsAHoldGrantedWhileOthersWait: a notify=wanted hold that
// begins while another agent's request already waits is told at once, from
// the waiting records, not a lease later. Here the hold is passed on inside
// its agent (a run of local holders: see agent/locks/cohort.go), so no release
// wakes the other agent's waiter to say again that it waits.
func TestWantedTellsAHoldGrantedWhileOthersWait(t *testing.T) {
	const lease = 5 * time.Second
	servers := redistest.Start(t, 3)
	var agents []*agenttest.Agent
	for _, id := range []string{"host-a", "host-b"} {
		cfg := agenttest.Config(t, servers, lease)
		cfg.AgentID = id
		cfg.Lock.CohortMaxHold = time.Hour // the run passes the name on though another agent waits
		agents = append(agents, agenttest.Start(t, cfg))
	}
	a, b := agents[0], agents[1]
	for try := range 5 {
		name := fmt.Sprintf("x%d", try)
		notified := passedWhileWaited(t, a, b, name)
		if notified == nil {
			continue // no run of local holders this time: try again
		}
		start := time.Now()
		p := awaitWanted(t, notified, name, "", time.Second) // the waiter's next word is a lease away
		t.Logf("a hold granted while another agent waits: %q after %v", p, time.Since(start))
		if !strings.HasSuffix(p, " waiting=1") {
			t.Fatalf("pushed %q, want waiting=1 (the other agent's one waiter)", p)
		}
		if r := notified.Do("UNLOCK " + name); r.Kind != "OK" {
			t.Fatal(r.Line)
		}
		return
	}
	t.Fatal("no run of local holders in 5 tries")
}

// passedWhileWaited makes a notify=wanted LOCK of name on a be passed the
// name inside a run of local holders, while a request on b waits for it,
// and returns its connection; nil if the agent started no run (the
// attempt that won the name was on its way before the waiter behind it
// came). A pass shows in the fences: the next of the run's block, where a
// grant from the masters counts past the whole block.
func passedWhileWaited(t *testing.T, a, b *agenttest.Agent, name string) *agenttest.Conn {
	t.Helper()
	dial := func() *agenttest.Conn { return agenttest.Dial(t, a.Config.Socket.Path) }
	zero := dial()
	if r := zero.Do("LOCK " + name); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	var conns []*agenttest.Conn
	var chans []<-chan agenttest.Reply
	for i, opts := range []string{"", "", " notify=wanted"} {
		c := dial()
		_, ch := c.Send("LOCK " + name + opts + " wait=30s")
		zero.AwaitWaiters(int64(i + 1)) // in this order
		conns, chans = append(conns, c), append(chans, ch)
	}
	zero.Do("UNLOCK " + name)
	first := conns[0].Await(chans[0])
	conns[0].Do("UNLOCK " + name)
	second := conns[1].Await(chans[1])
	if first.Kind != "OK" || second.Kind != "OK" {
		t.Fatalf("%s, %s", first.Line, second.Line)
	}
	run := second.Int("fence") == first.Int("fence")+1
	agenttest.Dial(t, b.Config.Socket.Path).Send("LOCK " + name + " wait=30s")
	awaitWho(t, zero, name, "host-a=1 host-b=1", 2, 5*time.Second)
	conns[1].Do("UNLOCK " + name)
	if !run {
		// Released in the masters: the other agent's waiter may win. Let
		// it go, and whoever wins, so that the next try starts afresh.
		conns[2].Close()
		return nil
	}
	r := conns[2].Await(chans[2])
	if r.Kind != "OK" || r.Int("fence") != second.Int("fence")+1 {
		t.Fatalf("the notify=wanted LOCK: %s, want the run's next fence after %d", r.Line, second.Int("fence"))
	}
	return conns[2]
}
