package tests

import (
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// cacheIt sends lock (a LOCK line) and UNLOCK of its name on c twice, and
// returns the second LOCK's reply: an agent caches a name only once it is
// used again within cache_linger of its release (a name used once is
// released at once), so the second release is the one kept. The caller
// awaits the mark (awaitCachedWho).
func cacheIt(t *testing.T, c *agenttest.Conn, lock string) agenttest.Reply {
	t.Helper()
	name := strings.Fields(lock)[1]
	var r agenttest.Reply
	for range 2 {
		if r = c.Do(lock); r.Kind != "OK" {
			t.Fatalf("%s: %s", lock, r.Line)
		}
		if u := c.Do("UNLOCK " + name); u.Kind != "OK" {
			t.Fatalf("UNLOCK %s: %s", name, u.Line)
		}
	}
	return r
}

// awaitCachedWho waits until WHO name on c answers with want as its cached=
// field ("" for none) and n= holders, or fails t after 5s (the mark is
// written in the background; a second was too short on a loaded host).
func awaitCachedWho(t *testing.T, c *agenttest.Conn, name, cached string, n int64) agenttest.Reply {
	t.Helper()
	var r agenttest.Reply
	lockagenttest.Eventually(t, 5*time.Second, func() bool { // the mark lands in the background: poll WHO, the thing under test
		r = c.Do("WHO " + name)
		return r.Fields["cached"] == cached && r.Int("n") == n
	}, "WHO %s: %q, want cached=%q n=%d", name, &r.Line, cached, n)
	return r
}

// TestACachedNameIsLentLocallyAndWhoTellsIt: after its last holder lets
// go, a name stays cached on its agent (WHO: cached=, no holder); the next
// LOCK there is answered from the cache with a higher fence, and WHO then
// names its holder again.
func TestACachedNameIsLentLocallyAndWhoTellsIt(t *testing.T) {
	a, b, _ := twoAgents(t, 3*time.Second)
	c := agenttest.Dial(t, a.Config.Socket.Path)
	other := agenttest.Dial(t, b.Config.Socket.Path)
	first := cacheIt(t, c, "LOCK cached")
	awaitCachedWho(t, other, "cached", "host-a", 0)
	before := metric(t, a, "lock_agent_cached_grants_total")
	fences := []int64{first.Int("fence")}
	for range 50 {
		r := c.Do("LOCK cached")
		if r.Kind != "OK" {
			t.Fatal(r.Line)
		}
		fences = append(fences, r.Int("fence"))
		c.Do("UNLOCK cached")
	}
	for i := 1; i < len(fences); i++ {
		if fences[i] <= fences[i-1] {
			t.Fatalf("fence %d after %d: %v", fences[i], fences[i-1], fences)
		}
	}
	if got := metric(t, a, "lock_agent_cached_grants_total") - before; got != 50 {
		t.Fatalf("%v of 50 LOCKs were answered from the cache", got)
	}
	held := c.Do("LOCK cached")
	if r := c.Do("WHO cached"); len(r.Data) != 1 || r.Data[0]["fence"] != held.Fields["fence"] {
		t.Fatalf("WHO of a lent name on its agent: %q %v, want its holder's fence %s at once", r.Line, r.Data, held.Fields["fence"])
	}
	// Another agent reads the masters, where the holder's fence lands within
	// retagEvery (10ms), as after a hand-over.
	var r agenttest.Reply
	lockagenttest.Eventually(t, time.Second, func() bool {
		r = other.Do("WHO cached")
		return r.Fields["cached"] == "" && len(r.Data) == 1 && r.Data[0]["fence"] == held.Fields["fence"]
	}, "WHO of a lent name on another agent: %v, want its holder's fence", &r)
	c.Do("UNLOCK cached")
}

// TestARemoteWait0LockOfACachedNameIsGranted: a wait=0 LOCK on another
// agent of a name that no client holds, only a cache, is granted (the
// caching agent gives it up when told), while a name a client holds still
// answers BUSY at once. It reports the p50 and p99 of the remote grant
// beside an uncached one's.
func TestARemoteWait0LockOfACachedNameIsGranted(t *testing.T) {
	a, b, _ := twoAgents(t, 3*time.Second)
	ca := agenttest.Dial(t, a.Config.Socket.Path)
	cb := agenttest.Dial(t, b.Config.Socket.Path)
	const rounds = 200
	var cachedTook, plainTook []time.Duration
	for i := range rounds {
		name := "remote" + strconv.Itoa(i) // one no agent cached before
		cacheIt(t, ca, "LOCK "+name)
		awaitCachedWho(t, cb, name, "host-a", 0)
		start := time.Now()
		r := cb.Do("LOCK " + name + " wait=0")
		cachedTook = append(cachedTook, time.Since(start))
		if r.Code == "NO_QUORUM" { // masters timed out on a loaded host: says nothing of caching
			cachedTook = cachedTook[:len(cachedTook)-1]
			continue
		}
		if r.Kind != "OK" {
			t.Fatalf("round %d: a wait=0 LOCK of a cached name: %s after %v; WHO %v", i, r.Line, cachedTook[len(cachedTook)-1], cb.Do("WHO "+name).Line)
		}
		cb.Do("UNLOCK " + name)
		// The uncached grant to compare with: a name nobody had.
		fresh := "fresh" + strconv.Itoa(i)
		start = time.Now()
		if r := cb.Do("LOCK " + fresh + " wait=0"); r.Code == "NO_QUORUM" {
			continue
		} else if r.Kind != "OK" {
			t.Fatal(r.Line)
		}
		plainTook = append(plainTook, time.Since(start))
		cb.Do("UNLOCK " + fresh)
	}
	t.Logf("remote wait=0 grant of a cached name: p50 %v p99 %v; of a free name: p50 %v p99 %v",
		quantile(cachedTook, 0.5), quantile(cachedTook, 0.99), quantile(plainTook, 0.5), quantile(plainTook, 0.99))

	// A name a client holds: BUSY, as fast as a free name's grant.
	ca.Do("LOCK held")
	awaitCachedWho(t, cb, "held", "", 1)
	var busyTook []time.Duration
	for range 50 {
		start := time.Now()
		if r := cb.Do("LOCK held wait=0"); r.Kind != "BUSY" {
			t.Fatalf("a wait=0 LOCK of a held name: %s", r.Line)
		}
		busyTook = append(busyTook, time.Since(start))
	}
	if p := quantile(busyTook, 0.5); p > 50*time.Millisecond {
		t.Fatalf("BUSY for a held name took p50 %v: it waited as for a cached one", p)
	}
	t.Logf("wait=0 BUSY of a held name: p50 %v p99 %v", quantile(busyTook, 0.5), quantile(busyTook, 0.99))
}

// quantile is the q-quantile of ds (sorted in place).
func quantile(ds []time.Duration, q float64) time.Duration {
	slices.Sort(ds)
	return ds[min(int(q*float64(len(ds))), len(ds)-1)]
}

// TestCachingUnderPausesAndFlushall: clients of two agents take one name
// now and then, so that each agent caches it between their turns, lends it
// to its own clients and gives it up to the other agent, while masters are
// paused at random and flushed (FLUSHALL) one at a time. No two holds
// overlap, and fences grow strictly in grant order across both agents:
// every fence lent from a cache came from a block a majority reserved.
func TestCachingUnderPausesAndFlushall(t *testing.T) {
	t.Parallel()
	cacheChurn(t, true)
}

// TestCachingAcrossTwoAgents is the same with no faults.
func TestCachingAcrossTwoAgents(t *testing.T) {
	t.Parallel()
	cacheChurn(t, false)
}

// cacheChurn runs TestCachingUnderPausesAndFlushall, with the faults if chaos.
func cacheChurn(t *testing.T, chaos bool) {
	// A short linger: a name the other agent took is cached again 10×
	// linger later (see agent/locks/cache.go), so that caches come and go
	// between the other agent's turns.
	a, b, servers := twoCachingAgents(t, time.Second, 20*time.Millisecond)
	stop := time.Now().Add(soak(5*time.Second, 10*time.Second))
	var wg sync.WaitGroup
	if chaos {
		wg.Go(func() { pauseAtRandom(servers, stop, rand.New(rand.NewPCG(7, 8))) })
		wg.Go(func() { flushAtRandom(t, servers, stop, rand.New(rand.NewPCG(9, 10))) })
	}
	var mu sync.Mutex
	var held []interval
	local, remote := 2, 1
	if chaos {
		local = 1 // no local waiter in the way: a cache at every local release a fault leaves alone
	}
	for i := range local + remote {
		agent := a
		if i >= local {
			agent = b
		}
		c := agenttest.Dial(t, agent.Config.Socket.Path)
		wg.Go(func() {
			mine := takeTurns(t, c, "cache-chaos", i, before(stop), nil, rand.New(rand.NewPCG(uint64(i), 21)), func(rng *rand.Rand) (time.Duration, time.Duration) {
				// Gaps between turns: the name stays cached, is lent to the
				// agent's other client, or goes to the other agent, whose
				// client comes now and then.
				if i >= local {
					return time.Duration(50+rng.IntN(250)) * time.Millisecond, time.Duration(rng.Int64N(int64(2 * time.Millisecond)))
				}
				return time.Duration(rng.Int64N(int64(6 * time.Millisecond))), time.Duration(rng.Int64N(int64(2 * time.Millisecond)))
			})
			mu.Lock()
			held = append(held, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	sort.Slice(held, func(i, j int) bool { return held[i].start.Before(held[j].start) })
	checkExclusive(t, held, local)
	cached := metric(t, a, "lock_agent_cached_grants_total") + metric(t, b, "lock_agent_cached_grants_total")
	byAgent := [2]int{}
	for _, iv := range held {
		byAgent[min(iv.who/local, 1)]++
	}
	if cached == 0 || byAgent[0] == 0 || byAgent[1] == 0 {
		t.Fatalf("%d grants (%v by agent), %v from a cache: the run did not exercise caching across both agents", len(held), byAgent, cached)
	}
	t.Logf("%d grants (%v by agent), %v lent from a cache (chaos %v); no overlap, fences grow", len(held), byAgent, cached, chaos)
}

// flushAtRandom empties one master at a time (FLUSHALL), every 1–2s
// (each sits out a lease's quarantine), until stop.
func flushAtRandom(t *testing.T, servers []*redistest.Server, stop time.Time, rng *rand.Rand) {
	for time.Now().Before(stop) {
		time.Sleep(time.Duration(1000+rng.IntN(1000)) * time.Millisecond)
		s := servers[rng.IntN(len(servers))]
		s.Resume() // a paused master would hold the FLUSHALL until the pause ends
		if _, err := s.Do("FLUSHALL"); err != nil {
			t.Logf("FLUSHALL: %v", err)
		}
	}
}

// BenchmarkCache compares, with lock caching on (cache_linger 1s) and off:
//
//   - serial: one client's LOCK+UNLOCK of one name (cached: two socket
//     round trips, no master);
//
//   - pingpong: two clients on two agents strictly alternating on one name
//     (each LOCK must take the name from the other agent).
//
//     go test ./tests -run '^$' -bench '^BenchmarkCache$' -benchtime 2000x -timeout 10m
func BenchmarkCache(b *testing.B) {
	for _, linger := range []time.Duration{time.Second, 0} {
		servers := redistest.Start(b, 3)
		cfgA := agenttest.Config(b, servers, 15*time.Second)
		cfgA.AgentID, cfgA.Lock.CacheLinger = "a", linger
		cfgB := agenttest.Config(b, servers, 15*time.Second)
		cfgB.AgentID, cfgB.Lock.CacheLinger = "b", linger
		a, bb := agenttest.Start(b, cfgA), agenttest.Start(b, cfgB)
		ca, cb := agenttest.Dial(b, a.Config.Socket.Path), agenttest.Dial(b, bb.Config.Socket.Path)
		b.Run("serial/linger="+linger.String(), func(b *testing.B) {
			samples := make([]time.Duration, 0, b.N)
			for range b.N {
				start := time.Now()
				lockUnlock(b, ca, "serial")
				samples = append(samples, time.Since(start))
			}
			report(b, "", samples)
		})
		b.Run("pingpong/linger="+linger.String(), func(b *testing.B) {
			samples := make([]time.Duration, 0, 2*b.N)
			for range b.N {
				for _, c := range []*agenttest.Conn{ca, cb} {
					start := time.Now()
					lockUnlock(b, c, "pingpong")
					samples = append(samples, time.Since(start))
				}
			}
			report(b, "", samples)
		})
	}
}

// lockUnlock takes name on c and lets it go.
func lockUnlock(b *testing.B, c *agenttest.Conn, name string) {
	if r := c.Do("LOCK " + name + " wait=10s"); r.Kind != "OK" {
		b.Fatal(r.Line)
	}
	if r := c.Do("UNLOCK " + name); r.Kind != "OK" {
		b.Fatal(r.Line)
	}
}

// TestACacheEndsAfterItsLingerOrWhenLost: a cached name no one asks for is
// released once cache_linger passed; a cached record the masters lost
// (every master flushed) ends the cache without a word, and the next LOCK
// goes to the masters, with a higher fence.
func TestACacheEndsAfterItsLingerOrWhenLost(t *testing.T) {
	servers := redistest.Start(t, 3)
	cfg := agenttest.Config(t, servers, time.Second)
	cfg.AgentID, cfg.Lock.CacheLinger = "host-a", 300*time.Millisecond
	long := agenttest.Config(t, servers, time.Second)
	long.AgentID, long.Lock.CacheLinger = "host-b", time.Minute // it lingers past the loss
	a, b := agenttest.Start(t, cfg), agenttest.Start(t, long)
	c := agenttest.Dial(t, a.Config.Socket.Path)
	cacheIt(t, c, "LOCK linger")
	awaitCachedWho(t, c, "linger", "host-a", 0)
	lockagenttest.Eventually(t, 3*time.Second, func() bool { return servers[0].Keys("lock-agent:{linger}:h:*") == 0 }, // the record, on a master
		"the cached record outlived its linger")

	c = agenttest.Dial(t, b.Config.Socket.Path)
	a = b
	first := cacheIt(t, c, "LOCK lost")
	awaitCachedWho(t, c, "lost", "host-b", 0)
	gaveUp := metric(t, a, "lock_agent_cache_give_ups_total")
	for _, s := range servers {
		s.Do("FLUSHALL")
	}
	lockagenttest.Eventually(t, 3*time.Second, func() bool { return metric(t, a, "lock_agent_cache_give_ups_total") != gaveUp }, // the watchdog's next renewal finds it lost
		"the cache outlived its record")
	before := metric(t, a, "lock_agent_cached_grants_total")
	r := c.Do("LOCK lost wait=10s") // after the masters' quarantine
	if r.Kind != "OK" || r.Int("fence") <= first.Int("fence") {
		t.Fatalf("LOCK after the cached record was lost: %s, want a fence above %d", r.Line, first.Int("fence"))
	}
	if got := metric(t, a, "lock_agent_cached_grants_total") - before; got != 0 {
		t.Fatalf("a LOCK after the loss was answered from the lost cache")
	}
	select {
	case p := <-c.Pushes():
		t.Fatalf("a push for a cache no client held: %q", p)
	default:
	}
}

// TestACachedNameLeadsNothing: an observer on another agent is told that
// nobody leads a name once its holder let go, and is told of the next
// holder. A name used again is cached, unless it is observed (see
// TestAnObservedNameIsNotCached): released, it leads nothing.
func TestACachedNameLeadsNothing(t *testing.T) {
	a, b, _ := twoAgents(t, 3*time.Second)
	c := agenttest.Dial(t, a.Config.Socket.Path)
	o := observe(t, agenttest.Dial(t, b.Config.Socket.Path), "led")
	first := c.Do("LOCK led")
	if !o.saw(first.Int("fence"), "", 2*time.Second) {
		t.Fatalf("the observer never saw the first holder: %v", o.events)
	}
	c.Do("UNLOCK led") // released: a name used once is not cached
	first = c.Do("LOCK led")
	if !o.saw(first.Int("fence"), "", 2*time.Second) {
		t.Fatalf("the observer never saw the second holder: %v", o.events)
	}
	c.Do("UNLOCK led")
	awaitCachedWho(t, c, "led", "", 0) // used again, but observed: released
	if !o.await(2*time.Second, func(es []leaderEvent) bool { return len(es) > 0 && es[len(es)-1].none }) {
		t.Fatalf("the observer was not told that a cached name has no leader: %v", o.events)
	}
	second := c.Do("LOCK led")
	if !o.saw(second.Int("fence"), "", 2*time.Second) {
		t.Fatalf("the observer never saw the next holder (fence %d): %v", second.Int("fence"), o.events)
	}
}

// TestASharedHoldCaches: a read lock caches as a lock does, and is lent
// only to a read lock; a reader on another agent is granted beside the
// cached record at once, and a writer there takes the name from the cache.
func TestASharedHoldCaches(t *testing.T) {
	a, b, _ := twoAgents(t, 3*time.Second)
	c := agenttest.Dial(t, a.Config.Socket.Path)
	other := agenttest.Dial(t, b.Config.Socket.Path)
	first := cacheIt(t, c, "LOCK read mode=shared")
	awaitCachedWho(t, other, "read", "host-a", 0)
	before := metric(t, a, "lock_agent_cached_grants_total")
	again := c.Do("LOCK read mode=shared")
	if again.Kind != "OK" || again.Int("fence") <= first.Int("fence") || metric(t, a, "lock_agent_cached_grants_total") != before+1 {
		t.Fatalf("a read lock of a cached read lock: %s after %s, not lent", again.Line, first.Line)
	}
	c.Do("UNLOCK read")
	awaitCachedWho(t, other, "read", "host-a", 0)
	if r := other.Do("LOCK read mode=shared wait=0"); r.Kind != "OK" {
		t.Fatalf("a reader beside a cached read lock: %s", r.Line)
	}
	other.Do("UNLOCK read")
	if r := other.Do("LOCK read wait=0"); r.Kind != "OK" {
		t.Fatalf("a writer after a cached read lock: %s", r.Line)
	}
}
