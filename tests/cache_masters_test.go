package tests

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/faultproxy"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// namesCommands counts the commands each master is sent (not those its
// scripts run) that name a key of any name starting with stem, from now
// until the returned function is called, which returns the counts.
func namesCommands(t *testing.T, servers []*redistest.Server, prefix, stem string) (stop func() []int) {
	t.Helper()
	const end = "lock-agent-test: end of count"
	mark := prefix + "{" + stem
	counts := make([]int, len(servers))
	var mu sync.Mutex
	var dones []<-chan struct{}
	for i, s := range servers {
		dones = append(dones, s.Monitor(func(c redistest.Command) bool {
			if len(c.Args) == 2 && strings.EqualFold(c.Args[0], "echo") && c.Args[1] == end {
				return false
			}
			if c.Script {
				return true
			}
			for _, a := range c.Args[1:] {
				if strings.Contains(a, mark) {
					mu.Lock()
					counts[i]++
					mu.Unlock()
					break
				}
			}
			return true
		}))
	}
	return func() []int {
		for i, s := range servers {
			if _, err := s.Do("ECHO", end); err != nil {
				t.Fatal(err)
			}
			<-dones[i]
		}
		mu.Lock()
		defer mu.Unlock()
		return counts
	}
}

// TestACachedLendingSendsTheMastersNothing: LOCK and UNLOCK of cached
// names in a loop, on one name and on 64, send the masters no command of
// their own: what the lendings changed is noted once per renewal tick for
// all the names together, the watchdog renews them once per tick, and a
// further block of fences is reserved once per ~96 lendings of a name.
// Before, every lending made its cache's keeper rewrite the record's
// holder and cached mark on every master (at most every 10ms per name).
// It logs the masters' INFO commandstats per cycle, the agent's background
// (health probes) included.
func TestACachedLendingSendsTheMastersNothing(t *testing.T) {
	for _, names := range []int{1, 64} {
		t.Run(fmt.Sprintf("%d names", names), func(t *testing.T) {
			const lease = 30 * time.Second // a renewal tick each 10s
			servers := redistest.Start(t, 3)
			cfg := agenttest.Config(t, servers, lease)
			cfg.Lock.CacheLinger = lease // no cache lingers out while the test sets up 64
			a := agenttest.Start(t, cfg)
			c := agenttest.Dial(t, a.Config.Socket.Path)
			stem := fmt.Sprintf("cyc%d/", names)
			var all []string
			for i := range names {
				name := fmt.Sprintf("%s%d", stem, i)
				all = append(all, name)
				cacheIt(t, c, "LOCK "+name)
			}
			for _, name := range all {
				awaitCachedWho(t, c, name, cfg.AgentID, 0)
			}
			cycles := 1000
			if names > 1 {
				cycles = 64 * 20
			}
			loop := func(cycles int) {
				for i := range cycles {
					name := all[i%names]
					if r := c.Do("LOCK " + name); r.Kind != "OK" {
						t.Fatalf("LOCK %s: %s", name, r.Line)
					}
					if r := c.Do("UNLOCK " + name); r.Kind != "OK" {
						t.Fatalf("UNLOCK %s: %s", name, r.Line)
					}
				}
			}
			// A cache starts with the few fences its grant reserved
			// (cacheGrantBlock), and a tight loop may use them up before its
			// first further block is reserved: a cache given up then is
			// granted and cached anew. Warm up past that.
			loop(max(200, 2*names))
			before, givenUp := metric(t, a, "lock_agent_cached_grants_total"), metric(t, a, "lock_agent_cache_give_ups_total")
			stats := commandCalls(t, servers)
			count := namesCommands(t, servers, cfg.Lock.KeyPrefix, stem)
			start := time.Now()
			loop(cycles)
			took := time.Since(start)
			counts := count()
			calls := commandCalls(t, servers) - stats
			// A cache whose further block of fences is late (a tight loop
			// under -race on a loaded host lends the last quarter of a block
			// in a few ms) is given up, and its next LOCK goes to the masters.
			givenUp = metric(t, a, "lock_agent_cache_give_ups_total") - givenUp
			lent := metric(t, a, "lock_agent_cached_grants_total") - before
			if lent+givenUp < float64(cycles) {
				t.Fatalf("%v of %d LOCKs were lent from a cache, %v caches given up", lent, cycles, givenUp)
			}
			// What the names may cost each master meanwhile: per tick that
			// the loop spans, a note and a renewal per name; a reserve per
			// ~96 lendings of a name; once per name, its keeper's first note
			// and reserve, made as it starts (the loop may overtake them);
			// and per cache given up, its release, the next grant, keeping
			// it, and its keeper's start (a dozen, with the subscription).
			ticks := int(took/(lease/3)) + 1
			allowed := names*2*ticks + names*(cycles/names/96+2) + 12*int(givenUp)
			for i, n := range counts {
				if n > allowed {
					t.Errorf("master %d was sent %d commands on the names in %d cached cycles of %d names (%v), want at most %d",
						i, n, cycles, names, took, allowed)
				}
			}
			t.Logf("%d cached cycles of %d names in %v (%v caches given up): %v commands on the names per master (at most %d allowed); "+
				"INFO commandstats: %.3f calls per cycle over the 3 masters, scripts' calls and the agent's background included",
				cycles, names, took, givenUp, counts, allowed, float64(calls)/float64(cycles))
		})
	}
}

// commandCalls is the sum of every command's calls in the servers' INFO
// commandstats (a script's own calls counted).
func commandCalls(t *testing.T, servers []*redistest.Server) int64 {
	t.Helper()
	var total int64
	for _, s := range servers {
		info, err := s.Info("commandstats")
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(info, "\n") {
			_, stats, ok := strings.Cut(strings.TrimSpace(line), ":")
			if !ok || !strings.HasPrefix(line, "cmdstat_") {
				continue
			}
			for _, kv := range strings.Split(stats, ",") {
				if v, ok := strings.CutPrefix(kv, "calls="); ok {
					var n int64
					fmt.Sscan(v, &n)
					total += n
				}
			}
		}
	}
	return total
}

// TestWhoAndCheckOfACachedNameOnAnotherAgent: the masters learn what a
// cache's lendings changed at its agent's next note, at most a renewal
// tick (lease/3) later, so another agent's WHO and CHECK answer as
// docs/protocol.md says: a fence lent since the last note is current at
// once; once its holder let go it stays current until the next note, and
// WHO shows the last noted holder until then; an earlier holder's fence is
// not current once a later one is noted. The caching agent itself answers
// for its own lendings at once.
func TestWhoAndCheckOfACachedNameOnAnotherAgent(t *testing.T) {
	const lease = 3 * time.Second
	tick := lease / 3
	a, b, _ := twoCachingAgents(t, lease, time.Minute) // no cache lingers out meanwhile
	ca := agenttest.Dial(t, a.Config.Socket.Path)
	cb := agenttest.Dial(t, b.Config.Socket.Path)
	check := func(c *agenttest.Conn, fence int64) string {
		t.Helper()
		r := c.Do(fmt.Sprintf("CHECK fresh fence=%d", fence))
		if r.Kind != "OK" {
			t.Fatalf("CHECK fresh fence=%d: %s", fence, r.Line)
		}
		return r.Fields["current"]
	}
	// within waits until cond holds, at most a tick and a second for
	// the masters' round, and says how long it took.
	within := func(what string, cond func() bool) time.Duration {
		t.Helper()
		start := time.Now()
		if !pollFor(tick+time.Second, 5*time.Millisecond, cond) {
			t.Fatalf("%s: not within a renewal tick (%v) and a second", what, tick)
		}
		return time.Since(start)
	}
	cacheIt(t, ca, "LOCK fresh")
	awaitCachedWho(t, cb, "fresh", "host-a", 0)

	first := ca.Do("LOCK fresh").Int("fence")
	if got := check(cb, first); got != "true" {
		t.Fatalf("another agent's CHECK of a fence just lent from a cache: current=%s, want true at once", got)
	}
	if got := check(ca, first); got != "true" {
		t.Fatalf("the caching agent's CHECK of its holder's fence: current=%s", got)
	}
	whoLent := within("another agent's WHO names the lent holder", func() bool {
		r := cb.Do("WHO fresh")
		return r.Fields["cached"] == "" && len(r.Data) == 1 && r.Data[0]["fence"] == strconv.FormatInt(first, 10)
	})
	ca.Do("UNLOCK fresh")
	if got := check(ca, first); got != "false" {
		t.Fatalf("the caching agent's CHECK of a fence given back: current=%s, want false at once", got)
	}
	checkBack := within("another agent's CHECK of a fence given back is false", func() bool { return check(cb, first) == "false" })
	awaitCachedWho(t, cb, "fresh", "host-a", 0) // the same note marked it cached

	second := ca.Do("LOCK fresh").Int("fence")
	if got := check(cb, second); got != "true" {
		t.Fatalf("another agent's CHECK of the next fence lent: current=%s, want true at once", got)
	}
	if got := check(cb, first); got != "false" {
		t.Fatalf("another agent's CHECK of a fence noted given back: current=%s", got)
	}
	if got := check(ca, first); got != "false" {
		t.Fatalf("the caching agent's CHECK of an earlier holder's fence: current=%s", got)
	}
	if got := check(ca, second+1); got != "false" {
		t.Fatalf("the caching agent's CHECK of a fence of its block not lent yet: current=%s", got)
	}
	ca.Do("UNLOCK fresh")
	t.Logf("renewal tick %v: another agent's WHO named the lent holder after %v, its CHECK of the fence given back was false after %v",
		tick, whoLent, checkBack)
}

// TestANoteTwoMastersMissedIsSentAgain: a cache's lending reaches the
// masters only in its agent's next note; two masters of three that miss
// it (their links cut) keep the earlier note, and count every fence above
// it current for as long as they do. The agent sends the note again at the
// next tick, so once the links are back those masters learn the lent
// holder's fence while it still holds the name.
func TestANoteTwoMastersMissedIsSentAgain(t *testing.T) {
	t.Parallel()                  // see TestMain
	const lease = 6 * time.Second // a tick of 2s; validity to spare while two links are cut
	servers := redistest.Start(t, 3)
	cfg, links := proxiedConfig(t, servers, lease)
	cfg.Lock.CacheLinger = time.Minute
	a := agenttest.Start(t, cfg)
	c := agenttest.Dial(t, a.Config.Socket.Path)
	fenceOn := func(s *redistest.Server) string {
		keys, err := s.Array("KEYS", cfg.Lock.KeyPrefix+"{nt}:h:*")
		if err != nil || len(keys) != 1 {
			return ""
		}
		f, _ := s.Do("HGET", keys[0], "fence")
		return f
	}
	// A lending given back, noted on every master: the caching agent's
	// first note (its keeper's) is behind it, and the next lending is
	// the batches' to note.
	first := cacheIt(t, c, "LOCK nt")
	noted := strconv.FormatInt(first.Int("fence")+1, 10)
	if r := c.Do("LOCK nt"); r.Kind != "OK" || strconv.FormatInt(r.Int("fence"), 10) != noted {
		t.Fatalf("LOCK of a cached name: %s, want fence %s", r.Line, noted)
	}
	c.Do("UNLOCK nt")
	lockagenttest.Eventually(t, 2*lease, func() bool {
		return fenceOn(servers[0]) == noted && fenceOn(servers[1]) == noted && fenceOn(servers[2]) == noted
	}, "a lending given back was never noted on every master")
	links[0].SetMode(faultproxy.Cut)
	links[1].SetMode(faultproxy.Cut)
	r := c.Do("LOCK nt")
	if r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	lent := strconv.FormatInt(r.Int("fence"), 10)
	lockagenttest.Eventually(t, 2*lease, func() bool { return fenceOn(servers[2]) == lent },
		"the note of the lending never reached the master whose link was up")
	// The cut lasts past the note's deadline (quorum.Cluster.NoteCaches:
	// 20 master timeouts, at least a second), so that no call of it is
	// still waiting to be sent when the links come back: the fault's
	// length, not a wait for an event.
	time.Sleep(max(20*cfg.Lock.MasterTimeout, time.Second) + 500*time.Millisecond)
	links[0].SetMode(faultproxy.Pass)
	links[1].SetMode(faultproxy.Pass)
	lockagenttest.Eventually(t, 2*lease, func() bool { return fenceOn(servers[0]) == lent && fenceOn(servers[1]) == lent },
		"the masters that missed the note never got it, though its holder still holds the name")
	if p := c.Push(0); p != "" {
		t.Fatalf("the holder heard %q", p)
	}
}

// TestAnObservedNameIsNotCached: a cache's lendings reach the masters, and
// so observers on other agents, only at its agent's next note, and an
// observer is owed every change at once (coordination.md §2). So a name
// another agent observes is not cached: a cache the observer came to is
// given up at its next note, and while the name is observed its last
// holder's release releases it; each lending is then a grant the masters
// publish, and the observer hears of it within a fraction of a tick.
func TestAnObservedNameIsNotCached(t *testing.T) {
	const lease = 6 * time.Second
	tick := lease / 3
	a, b, _ := twoCachingAgents(t, lease, time.Minute)
	ca := agenttest.Dial(t, a.Config.Socket.Path)
	cb := agenttest.Dial(t, b.Config.Socket.Path)
	cacheIt(t, ca, "LOCK ob")
	awaitCachedWho(t, cb, "ob", "host-a", 0)
	obs := observe(t, agenttest.Dial(t, b.Config.Socket.Path), "ob")
	if !obs.await(5*time.Second, func(es []leaderEvent) bool { return len(es) == 1 }) {
		t.Fatal("no first push")
	}
	// The lending's note (the next tick) finds the name observed: the cache
	// is given up once its holder lets go.
	if r := ca.Do("LOCK ob"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	ca.Do("UNLOCK ob")
	lockagenttest.Eventually(t, 3*tick, func() bool { r := cb.Do("WHO ob"); return r.Int("n") == 0 && r.Fields["cached"] == "" },
		"the cache of an observed name was not given up at its next note")
	for range 3 {
		start := time.Now()
		r := ca.Do("LOCK ob")
		if r.Kind != "OK" {
			t.Fatal(r.Line)
		}
		if !obs.await(5*time.Second, func(es []leaderEvent) bool { return es[len(es)-1].fence == r.Int("fence") }) {
			t.Fatalf("no push of the holder of fence %d: %v", r.Int("fence"), obs.snapshot())
		}
		if es := obs.snapshot(); es[len(es)-1].at.Sub(start) > tick/2 {
			t.Errorf("the observer heard of a lending %v after the LOCK, want well within a tick (%v)", es[len(es)-1].at.Sub(start), tick)
		}
		ca.Do("UNLOCK ob")
		awaitCachedWho(t, cb, "ob", "", 0) // released, not cached: it is observed
	}
}
