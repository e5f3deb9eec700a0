package tests

import (
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// TestBreaker19AnAgentWithoutCachingTakesACachedName: settings differ
// between agents. An agent with cache_linger=0 (caching off) must still
// say that it wants a name another agent caches, and be granted it with
// wait=0, with a fence above the cached one's.
func TestBreaker19AnAgentWithoutCachingTakesACachedName(t *testing.T) {
	servers := redistest.Start(t, 3)
	cfgA := agenttest.Config(t, servers, 3*time.Second)
	cfgA.AgentID = "host-a" // caching on, default linger
	cfgB := agenttest.Config(t, servers, 3*time.Second)
	cfgB.AgentID, cfgB.Lock.CacheLinger = "host-b", 0
	a, b := agenttest.Start(t, cfgA), agenttest.Start(t, cfgB)
	ca, cb := agenttest.Dial(t, a.Config.Socket.Path), agenttest.Dial(t, b.Config.Socket.Path)
	for i := range 20 {
		name := "mismatch" + strconv.Itoa(i)
		first := cacheIt(t, ca, "LOCK "+name)
		awaitCachedWho(t, cb, name, "host-a", 0)
		r := cb.Do("LOCK " + name + " wait=0")
		if r.Kind != "OK" || r.Int("fence") <= first.Int("fence") {
			t.Fatalf("a wait=0 LOCK, on an agent that does not cache, of a name another caches: %s (cached fence %d)", r.Line, first.Int("fence"))
		}
		// B does not cache: once it let go, A takes it back at once.
		cb.Do("UNLOCK " + name)
		if r := ca.Do("LOCK " + name + " wait=0"); r.Kind != "OK" {
			t.Fatalf("the caching agent after a non-caching one let go: %s", r.Line)
		}
		ca.Do("UNLOCK " + name)
	}
}

// TestBreaker19RevokeOfACachedAndOfALentName: REVOKE of a name only cached
// ends the cache (the next local LOCK is no lending of the revoked record);
// REVOKE of a lent name tells its client LOST before the operator's agent
// grants it, with a higher fence.
func TestBreaker19RevokeOfACachedAndOfALentName(t *testing.T) {
	t.Parallel() // its own masters and agents; judges no latency
	// No cache lingers out meanwhile: with the default linger (1s) the
	// other agent's WHO had to see the cache within that second, and on
	// a loaded host (a soak run) it did not.
	a, b, _ := twoCachingAgents(t, 3*time.Second, time.Minute)
	ca, operator, cb := agenttest.Dial(t, a.Config.Socket.Path), agenttest.Dial(t, b.Config.Socket.Path), agenttest.Dial(t, b.Config.Socket.Path)
	first := cacheIt(t, ca, "LOCK rv19")
	awaitCachedWho(t, operator, "rv19", "host-a", 0)
	if r := operator.Do("REVOKE rv19 reason=maintenance"); r.Kind != "OK" {
		t.Fatalf("REVOKE of a cached name: %q", r.Line)
	}
	if r := cb.Do("LOCK rv19 wait=0"); r.Kind != "OK" || r.Int("fence") <= first.Int("fence") {
		t.Fatalf("LOCK on another agent after REVOKE of a cached name: %s", r.Line)
	}
	if r := ca.Do("LOCK rv19 wait=0"); r.Kind != "BUSY" {
		t.Fatalf("the caching agent lent a revoked name held elsewhere: %s", r.Line)
	}
	cb.Do("UNLOCK rv19")

	// Cached again on A, then lent.
	cacheIt(t, ca, "LOCK rv19 wait=5s")
	awaitCachedWho(t, operator, "rv19", "host-a", 0)
	lent := ca.Do("LOCK rv19 wait=0")
	if lent.Kind != "OK" {
		t.Fatal(lent.Line)
	}
	if r := operator.Do("REVOKE rv19 reason=maintenance"); r.Kind != "OK" {
		t.Fatalf("REVOKE of a lent name: %q", r.Line)
	}
	// REVOKE answers once the name is released, and its holder was told
	// first; the LOST comes on another connection, whose reader may queue
	// it a moment after this one read the REVOKE's answer.
	select {
	case p := <-ca.Pushes():
		if !strings.HasPrefix(p, "* LOST rv19 ") {
			t.Fatalf("push %q, want LOST", p)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the holder of a revoked lent name was never told LOST")
	}
	r := cb.Do("LOCK rv19 wait=0")
	if r.Kind != "OK" || r.Int("fence") <= lent.Int("fence") {
		t.Fatalf("LOCK after REVOKE of a lent name: %s, want a fence above %d", r.Line, lent.Int("fence"))
	}
	if r := ca.Do("UNLOCK rv19"); r.Kind != "ERR" {
		t.Fatalf("UNLOCK of a revoked lent hold: %s", r.Line)
	}
	if r := ca.Do("LOCK rv19 wait=0"); r.Kind != "BUSY" {
		t.Fatalf("a revoked lent record came back to the cache and was lent again: %s", r.Line)
	}
}

// TestBreaker19ABurstOfCachedNamesLeavesNothing: 500 fresh names (1000
// with LOCK_AGENT_SOAK) locked and let go twice each with caching on (so
// that each is cached); once the linger ended, no record is left on the
// masters and the keepers' goroutines are gone.
func TestBreaker19ABurstOfCachedNamesLeavesNothing(t *testing.T) {
	servers := redistest.Start(t, 3)
	cfg := agenttest.Config(t, servers, 3*time.Second)
	cfg.AgentID, cfg.Lock.CacheLinger = "host-a", 200*time.Millisecond
	a := agenttest.Start(t, cfg)
	c := agenttest.Dial(t, a.Config.Socket.Path)
	c.Do("PING")
	base := nameGoroutines()
	n := soak(500, 1000) // the longest of the suite's timing tests at 1000 (16-24 s)
	for i := range n {
		cacheIt(t, c, "LOCK burst19-"+strconv.Itoa(i))
	}
	left := 0 // the last names are still cached: the records are there to see
	for _, s := range servers {
		left += s.Keys("lock-agent:{burst19-*}:h:*")
	}
	if left == 0 {
		t.Fatal("no cached record seen right after the burst: the check below would prove nothing")
	}
	keys, g := 0, 0
	lockagenttest.Eventually(t, 15*time.Second, func() bool { // polls the state under test
		keys, g = 0, nameGoroutines()
		for _, s := range servers {
			keys += s.Keys("lock-agent:{burst19-*}:h:*")
		}
		return keys == 0 && g <= base+10
	}, "after the linger: %d records left on the masters, %d goroutines (before the burst %d)", &keys, &g, base)
	t.Logf("%d cached names: records gone, goroutines %d (before %d)", n, g, base)
}

// TestANameUsedOnceIsNotCached: with caching on, 1000 names each locked
// and let go once are released at once, as with caching off: no keeper
// goroutine, no cached record, nothing left for a linger to end. Only a
// name locked again within cache_linger of its release is kept.
func TestANameUsedOnceIsNotCached(t *testing.T) {
	servers := redistest.Start(t, 3)
	cfg := agenttest.Config(t, servers, 3*time.Second)
	cfg.AgentID, cfg.Lock.CacheLinger = "host-a", time.Minute
	a := agenttest.Start(t, cfg)
	c := agenttest.Dial(t, a.Config.Socket.Path)
	c.Do("PING")
	base := nameGoroutines()
	const n = 1000
	for i := range n {
		name := "once19-" + strconv.Itoa(i)
		if r := c.Do("LOCK " + name); r.Kind != "OK" {
			t.Fatal(r.Line)
		}
		if r := c.Do("UNLOCK " + name); r.Kind != "OK" {
			t.Fatal(r.Line)
		}
	}
	if g := nameGoroutines(); g > base+10 {
		t.Fatalf("%d goroutines after %d names used once, %d before: their caches are kept", g, n, base)
	}
	if r := c.Do("WHO once19-999"); r.Fields["cached"] != "" || r.Int("n") != 0 {
		t.Fatalf("WHO of a name used once: %s, want it released", r.Line)
	}
	again := cacheIt(t, c, "LOCK once19-0") // used again, well within the linger of its last release
	awaitCachedWho(t, c, "once19-0", "host-a", 0)
	if r := c.Do("LOCK once19-0"); r.Kind != "OK" || r.Int("fence") <= again.Int("fence") {
		t.Fatalf("a name used again: %s after fence %d, want it lent from the cache", r.Line, again.Int("fence"))
	}
}

// nameGoroutines counts the process's goroutines but for the two that
// each Redis connection runs once it carries overlapping commands (its
// pipeline's reader and writer): a connection enters that mode the first
// time two commands overlap on it, a straggler's answer beside the next
// round, and keeps it for its life. Under two CPU hogs, after a burst of
// 1000 names used once, 8 to 12 more goroutines than before it were
// counted, most of them those of four more connections gone to that
// mode, none a name's (issue 27: 43 against 28). They are per connection,
// never per name; a goroutine kept per name is what these tests look for.
func nameGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if !strings.Contains(g, "rueidis.(*pipe)._background") {
			count++
		}
	}
	return count
}
