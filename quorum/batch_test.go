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
