package quorum

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/redistest"
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
// own call would: of many attempts on one name exactly one wins, and every
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
			if _, err := c.Acquire(ctx, req("same", fmt.Sprintf("s%d", i))); err == nil {
				mu.Lock()
				sameWon++
				mu.Unlock()
			}
		}()
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("d%d", i)
			g, err := c.Acquire(ctx, req(name, "h"))
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
	if sameWon != 1 {
		t.Fatalf("%d of %d attempts on one name won, want 1", sameWon, rounds)
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
		if _, err := s.Do("SET", c.setKey("broken"), "not a set"); err != nil {
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
			_, errs[i] = c.Acquire(ctx, req(name, fmt.Sprintf("h%d", i)))
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
		if _, err := c.Acquire(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if n := servers[0].Keys("t:{r*}:h:h"); n != holds {
		t.Fatalf("m0 has %d of %d holds before the pause", n, holds)
	}
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
	left := 0
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if left = servers[0].Keys("t:{r*}:h:h"); left == 0 {
			return
		}
	}
	t.Fatalf("%d of %d released holds are still on the master that was paused during their release", left, holds)
}
