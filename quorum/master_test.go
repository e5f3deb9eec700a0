package quorum

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
	"github.com/redis/rueidis"
)

// evalshaCalls is how many EVALSHA calls server s has served.
func evalshaCalls(t *testing.T, s *redistest.Server) int {
	t.Helper()
	info, err := s.Info("commandstats")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:calls="); ok {
			n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
			return n
		}
	}
	return 0
}

// TestConcurrentRoundsShareScriptCalls: rounds that come while a master is
// busy go to it in batches, and a batch decides each of its items as its
// own call would: of many attempts on one name at most one wins, and every
// name of many distinct ones is granted once, with its own fence.
func TestConcurrentRoundsShareScriptCalls(t *testing.T) {
	servers := redistest.Start(t, 3)
	cfg := testConfig(t, servers, time.Second, true)
	cfg.MasterTimeout = 2 * time.Second // a loaded host must not turn waits into failures
	c := startCluster(t, cfg)
	ctx := context.Background()
	before := evalshaCalls(t, servers[0])
	const rounds = 300
	var (
		wg         sync.WaitGroup
		mu         sync.Mutex
		sameWon    int
		fences     = map[string]int64{}
		distinctOK int
	)
	for i := range rounds {
		wg.Add(2)
		go func() {
			defer wg.Done()
			if _, err := acquire(ctx, c, req("same", fmt.Sprintf("s%d", i))); err == nil {
				mu.Lock()
				sameWon++
				mu.Unlock()
			}
		}()
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("d%d", i)
			g, err := acquire(ctx, c, req(name, "h"))
			if err != nil {
				t.Errorf("%s: %v", name, err)
				return
			}
			mu.Lock()
			distinctOK++
			fences[name] = g.Fence
			mu.Unlock()
		}()
	}
	wg.Wait()
	if sameWon > 1 { // none may win: each master may have granted another attempt first (a split vote)
		t.Fatalf("%d of %d attempts on one name won, want at most 1", sameWon, rounds)
	}
	if distinctOK != rounds {
		t.Fatalf("%d of %d distinct names granted", distinctOK, rounds)
	}
	calls := evalshaCalls(t, servers[0]) - before
	if calls >= 2*rounds {
		t.Fatalf("m0 served %d script calls for %d acquire rounds (and the releases of the split votes): no batching", calls, 2*rounds)
	}
	t.Logf("m0 served %d script calls for %d rounds", calls, 2*rounds)
}

// TestABatchItemThatFailsFailsAlone: a name whose keys a hostile user broke
// (a holder set that is not a set) fails its own rounds, not those of the
// names that share a batch with it.
func TestABatchItemThatFailsFailsAlone(t *testing.T) {
	servers := redistest.Start(t, 3)
	cfg := testConfig(t, servers, time.Second, true)
	cfg.MasterTimeout = 2 * time.Second
	c := startCluster(t, cfg)
	for _, s := range servers {
		if _, err := s.Do("SET", c.keys.Set("broken"), "not a set"); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 100)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("fine%d", i)
			if i%10 == 0 {
				name = "broken"
			}
			_, errs[i] = acquire(ctx, c, req(name, fmt.Sprintf("h%d", i)))
		}()
	}
	wg.Wait()
	for i, err := range errs {
		switch {
		case i%10 == 0 && err == nil:
			t.Errorf("the broken name was granted")
		case i%10 != 0 && err != nil:
			t.Errorf("fine%d failed beside the broken name: %v", i, err)
		}
	}
}

// TestReleasesQueuedForAHungMasterLandWhenItAnswers: a burst of releases
// while one master is paused longer than a release's deadline. Each Release
// returns on the other two, and each must still land on the paused one once
// it answers again (see Release: a key left behind blocks its name there
// for a whole lease), including those that waited for a batch meanwhile.
func TestReleasesQueuedForAHungMasterLandWhenItAnswers(t *testing.T) {
	servers := redistest.Start(t, 3)
	cfg := testConfig(t, servers, time.Second, true)
	cfg.MasterTimeout = 50 * time.Millisecond // a release's deadline: 1s
	c := startCluster(t, cfg)
	t.Cleanup(servers[0].Resume)
	ctx := context.Background()
	const holds = 400 // more than batchSenders calls and their batches carry at once
	for i := range holds {
		r := req(fmt.Sprintf("r%d", i), "h")
		r.Lease = time.Minute
		if _, err := acquire(ctx, c, r); err != nil {
			t.Fatal(err)
		}
	}
	// A grant returns once a majority has it: m0's may land just after (on
	// a loaded host it did: "m0 has 398 of 400 holds").
	n := 0
	lockagenttest.Eventually(t, 5*time.Second, func() bool { n = servers[0].Keys("t:{r*}:h:h"); return n == holds },
		"m0 has %d of %d holds before the pause", &n, holds)
	servers[0].Pause()
	var wg sync.WaitGroup
	burst := make(chan struct{})
	for i := range holds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-burst
			if _, err := c.Release(ctx, fmt.Sprintf("r%d", i), "h"); err != nil {
				t.Errorf("release r%d: %v", i, err)
			}
		}()
	}
	close(burst)
	wg.Wait()
	time.Sleep(1500 * time.Millisecond) // past the releases' deadline
	servers[0].Resume()
	lockagenttest.Eventually(t, 3*time.Second, func() bool { n = servers[0].Keys("t:{r*}:h:h"); return n == 0 },
		"%d of %d released holds are still on the master that was paused during their release", &n, holds)
}

// runAcquireBatch sends reqs to master i as one call of the batch script,
// as a sender does, and returns each item's reply.
func runAcquireBatch(c *Cluster, i int, reqs []AcquireRequest) []rueidis.RedisResult {
	out := make([]rueidis.RedisResult, len(reqs))
	batch := make([]*batchItem, len(reqs))
	for j, r := range reqs {
		keys, args := c.acquireArgs(r)
		batch[j] = &batchItem{keys: keys, args: args, deadline: time.Now().Add(time.Second), timeout: time.Second,
			done: func(res rueidis.RedisResult) { out[j] = res }}
	}
	c.masters[i].acquires.run(batch)
	return out
}

// TestABatchIsGatedLikeACallOfItsOwn: the batch script's one gate refuses
// every item of a batch on a master whose data may be stale, both where the
// master still knows the script (the marker is not the one the agent
// verified) and where it does not (a restart: the fallback reads the
// server's run_id), and plants a new, quarantined marker there.
func TestABatchIsGatedLikeACallOfItsOwn(t *testing.T) {
	for _, tc := range []struct {
		name   string
		flush  bool // SCRIPT FLUSH, as a restart does
		wantQ0 bool // a new quarantined marker is planted
	}{
		{"a marker another server left, scripts cached", false, false},
		{"a marker another server left, scripts lost as in a restart", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			servers := redistest.Start(t, 3)
			cfg := testConfig(t, servers, 10*time.Second, true)
			cfg.ProbeInterval = time.Minute // the probe must not meet the stale marker first
			c := startCluster(t, cfg)
			// A vote on m0 first, so that the connection's first vote,
			// which reads the run_id (see master.uncheckedRun), is behind
			// it: a round's vote would do only if m0's answer were one the
			// round read, and it may be the one a round no longer waits for.
			for _, r := range runAcquireBatch(c, 0, []AcquireRequest{req("warm", "h")}) {
				if vals, err := r.AsIntSlice(); err != nil || len(vals) == 0 || vals[0] != 1 {
					t.Fatalf("the warm-up vote on m0: %v %v", vals, err)
				}
			}
			marker := c.keys.Marker()
			if _, err := servers[0].Do("HSET", marker, "run", "0123456789abcdef"); err != nil {
				t.Fatal(err)
			}
			if tc.flush {
				if _, err := servers[0].Do("SCRIPT", "FLUSH"); err != nil {
					t.Fatal(err)
				}
			}
			var reqs []AcquireRequest
			for j := range 10 {
				reqs = append(reqs, req(fmt.Sprintf("g%d", j), "h"))
			}
			for j, r := range runAcquireBatch(c, 0, reqs) {
				vals, err := r.AsIntSlice()
				if err != nil || len(vals) != 2 || vals[0] != -2 || vals[1] <= 0 {
					t.Errorf("item %d: %v %v, want {-2, ms} (quarantined)", j, vals, err)
				}
			}
			if n := servers[0].Keys("t:{g*}:h:*"); n != 0 {
				t.Fatalf("%d holds written on a master whose data may be stale", n)
			}
			run, _ := servers[0].Do("HGET", marker, "run")
			until, _ := servers[0].Do("HGET", marker, "until")
			if planted := run != "0123456789abcdef" && until != "0"; planted != tc.wantQ0 {
				t.Fatalf("marker run=%s until=%s: planted a new quarantined marker = %v, want %v", run, until, planted, tc.wantQ0)
			}
		})
	}
}

// slowScript keeps a master busy for about 200ms, as a slow command would.
const slowScript = `local s = redis.call('TIME')
repeat local n = redis.call('TIME') until (n[1] - s[1]) * 1000000 + (n[2] - s[2]) > 200000
return 1`

// TestBatchedRoundsUnderFaults: many rounds at once (so that they go in
// batches) on a few shared names and many others, while one master at a
// time is paused, restarted empty, flushed, loses its scripts or is busy,
// with rounds short enough that items expire waiting for a batch. A hold
// lasts from its grant until its release is sent (within its validity):
// never two at once on a name, a grant answered before another was asked
// for has the lower fence, no round fails on a malformed reply, and once
// every hold was released none is left on any master.
func TestBatchedRoundsUnderFaults(t *testing.T) {
	t.Parallel() // waits out faults and quarantines; judges no latency
	servers := redistest.Start(t, 3)
	const lease = time.Second
	cfg := testConfig(t, servers, lease+200*time.Millisecond, true)
	cfg.MasterTimeout = 30 * time.Millisecond
	c := startCluster(t, cfg)
	t.Cleanup(func() {
		for _, s := range servers {
			s.Resume()
		}
	})
	ctx := context.Background()
	begin := time.Now()
	stop := begin.Add(4 * time.Second)
	type hold struct {
		call, start, end time.Time
		fence            int64
	}
	var (
		mu     sync.Mutex
		holds  = map[string][]hold{}
		grants int
		errs   = map[string]int{}
	)
	noteErr := func(err error) {
		var round *RoundError
		if !errors.As(err, &round) {
			mu.Lock()
			errs[err.Error()]++
			mu.Unlock()
			return
		}
		mu.Lock()
		for _, e := range round.Masters {
			errs[e.Error()]++
		}
		mu.Unlock()
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(5, 6))
		for time.Now().Before(stop) {
			i := rng.IntN(3)
			s := servers[i]
			switch rng.IntN(6) {
			case 0, 1:
				redistest.PauseFor(time.Duration(100+rng.IntN(300))*time.Millisecond, servers, i)
			case 2: // only m0 loses its data: two masters lost would stop every round for a quarantine
				servers[0].Restart()
			case 3:
				servers[0].Do("FLUSHALL")
			case 4:
				s.Do("SCRIPT", "FLUSH")
			case 5:
				s.Do("EVAL", slowScript, "0")
			}
			time.Sleep(time.Duration(100+rng.IntN(300)) * time.Millisecond)
		}
	}()
	const shared, others = 40, 80
	for w := range shared + others {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for n := 0; time.Now().Before(stop); n++ {
				name := fmt.Sprintf("s%d", w%4)
				if w >= shared {
					name = fmt.Sprintf("u%d-%d", w, n%8)
				}
				r := req(name, fmt.Sprintf("w%d-%d", w, n))
				r.Lease = lease
				call := time.Now()
				g, err := acquire(ctx, c, r)
				if err != nil {
					noteErr(err)
					time.Sleep(time.Duration(rng.IntN(10)) * time.Millisecond)
					continue
				}
				start := time.Now()
				end := start.Add(time.Duration(rng.IntN(20)) * time.Millisecond)
				if end.After(g.Deadline) {
					end = g.Deadline
				}
				time.Sleep(time.Until(end))
				end = time.Now()
				if _, err := c.Release(ctx, name, r.Holder); err != nil {
					noteErr(err)
				}
				mu.Lock()
				grants++
				if w < shared {
					holds[name] = append(holds[name], hold{call, start, end, g.Fence})
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, s := range servers {
		s.Resume()
	}
	for name, hs := range holds {
		sort.Slice(hs, func(i, j int) bool { return hs[i].start.Before(hs[j].start) })
		for i := range hs {
			for j := range i {
				if hs[j].end.After(hs[i].start) {
					t.Fatalf("TWO HOLDERS of %s: fence %d held %v-%v, fence %d from %v", name,
						hs[j].fence, hs[j].start.Sub(begin), hs[j].end.Sub(begin), hs[i].fence, hs[i].start.Sub(begin))
				}
				if hs[j].start.Before(hs[i].call) && hs[i].fence <= hs[j].fence {
					t.Fatalf("FENCE of %s: %d granted after %d had been answered", name, hs[i].fence, hs[j].fence)
				}
			}
		}
	}
	for e, n := range errs {
		if strings.Contains(e, "batch") || strings.Contains(e, "unexpected") || strings.Contains(e, "script") {
			t.Errorf("%d rounds failed on %q", n, e)
		}
	}
	left := 0
	lockagenttest.Eventually(t, lease/2, func() bool {
		left = 0
		for _, s := range servers {
			left += s.Keys("t:{*}:h:*")
		}
		return left == 0
	}, "%d holds left on the masters after every hold was released", &left)
	t.Logf("%d grants (%d on shared names); round errors: %v", grants, func() int {
		n := 0
		for _, hs := range holds {
			n += len(hs)
		}
		return n
	}(), errs)
}

// TestABatchQueueIsBounded: the calls waiting for a master that does not
// answer are bounded; beyond the bound a call fails at once, as one to a
// master that does not answer, instead of the queue growing while it hangs.
func TestABatchQueueIsBounded(t *testing.T) {
	b := &batcher{inflight: batchSenders} // every sender busy, as behind a hung master
	later := time.Now().Add(time.Hour)
	for range batchQueueMax {
		b.wait(&batchItem{deadline: later, done: func(rueidis.RedisResult) { t.Fatal("a call was answered while the queue had room") }})
	}
	var got error
	if answered := b.wait(&batchItem{deadline: later, done: func(r rueidis.RedisResult) { got = r.Error() }}); !answered || !errors.Is(got, ErrOverloaded) {
		t.Fatalf("a call beyond the bound: answered %v with %v, want ErrOverloaded at once", answered, got)
	}
	if len(b.queue) != batchQueueMax {
		t.Fatalf("%d calls queued, want %d", len(b.queue), batchQueueMax)
	}
}

// TestCallsQueuedBehindAHungMasterHearAtTheirDeadline: a call queued
// behind a master that does not answer is answered when its deadline
// passes, as a call of its own would be, not when a sender reaches it; an
// acquire then leaves the queue, a release stays to be sent (it must land).
func TestCallsQueuedBehindAHungMasterHearAtTheirDeadline(t *testing.T) {
	for _, land := range []bool{false, true} {
		b := &batcher{inflight: batchSenders, land: land} // every sender busy
		answers := make(chan error, 10)
		past := time.Now().Add(-time.Millisecond)
		for range 3 {
			b.wait(&batchItem{deadline: past, done: func(r rueidis.RedisResult) { answers <- r.Error() }})
		}
		b.wait(&batchItem{deadline: time.Now().Add(time.Hour), done: func(r rueidis.RedisResult) { answers <- r.Error() }})
		for range 3 {
			select {
			case err := <-answers:
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("land=%v: %v, want DeadlineExceeded", land, err)
				}
			default:
				t.Fatalf("land=%v: a call past its deadline was not answered", land)
			}
		}
		if len(answers) != 0 {
			t.Fatalf("land=%v: a call before its deadline was answered", land)
		}
		if want := map[bool]int{false: 1, true: 4}[land]; len(b.queue) != want {
			t.Fatalf("land=%v: %d calls queued, want %d", land, len(b.queue), want)
		}
	}
}
