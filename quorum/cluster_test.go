package quorum

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
	"github.com/lock-agent/lock-agent/quorum/rules"
	"github.com/lock-agent/lock-agent/quorum/scripts"
)

func newCluster(t testing.TB, servers []*redistest.Server, quarantine time.Duration) *Cluster {
	t.Helper()
	return startCluster(t, testConfig(t, servers, quarantine, true))
}

// testConfig is a cluster configuration over servers. With fresh, the
// servers are bootstrapped first: they are new, so they need not sit out a
// quarantine.
func testConfig(t testing.TB, servers []*redistest.Server, quarantine time.Duration, fresh bool) Config {
	t.Helper()
	cfg := Config{KeyPrefix: "t:", DriftFactor: 0.01, MasterTimeout: 100 * time.Millisecond, ProbeInterval: 20 * time.Millisecond,
		Quarantine: quarantine, Tombstone: 5 * time.Second}
	for i, s := range servers {
		cfg.Masters = append(cfg.Masters, MasterConfig{Name: fmt.Sprintf("m%d", i), Address: s.Addr})
	}
	if fresh {
		if _, err := Bootstrap(context.Background(), cfg.KeyPrefix, cfg.Masters); err != nil {
			t.Fatal(err)
		}
	}
	return cfg
}

// startCluster runs a cluster until the test ends and waits until every master is up.
func startCluster(t testing.TB, cfg Config) *Cluster {
	t.Helper()
	c := runCluster(t, cfg)
	waitStates(t, c, func(st []MasterStatus) bool {
		for _, s := range st {
			if s.State != StateUp {
				return false
			}
		}
		return true
	})
	return c
}

// runCluster runs a cluster until the test ends.
func runCluster(t testing.TB, cfg Config) *Cluster {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		c.Run(ctx)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return c
}

func waitStates(t testing.TB, c *Cluster, ok func([]MasterStatus) bool) {
	t.Helper()
	var st []MasterStatus
	lockagenttest.Eventually(t, 5*time.Second, func() bool { st = c.Status(); return ok(st) },
		"masters never reached the wanted state: %+v", &st)
}

func req(name, holder string) AcquireRequest {
	return AcquireRequest{Name: name, Holder: holder, Lease: 5 * time.Second, Who: Who{Agent: "t", Owner: holder}}
}

// acquire is c.Acquire with its refusal as an error, as the agent's edge
// reads it (Refusal.Err).
func acquire(ctx context.Context, c *Cluster, r AcquireRequest) (Grant, error) {
	g, refusal, err := c.Acquire(ctx, r)
	if err != nil {
		return g, err
	}
	return g, refusal.Err()
}

// acquireWithRetries is acquire for tests of what a grant is, not of
// whether one comes: on a loaded host the masters left up may answer after
// a round's deadline, so a round that found no quorum is tried again, with
// a fresh holder (holderOf(try)), up to five times. It returns the holder
// that won.
func acquireWithRetries(ctx context.Context, c *Cluster, holderOf func(try int) AcquireRequest) (Grant, string, error) {
	r := holderOf(0)
	g, err := acquire(ctx, c, r)
	for try := 1; errors.Is(err, ErrNoQuorum) && try < 5; try++ {
		r = holderOf(try)
		g, err = acquire(ctx, c, r)
	}
	return g, r.Holder, err
}

func TestAcquireReleaseAndBusy(t *testing.T) {
	servers := redistest.Start(t, 3)
	c := newCluster(t, servers, time.Second)
	ctx := context.Background()
	g, err := acquire(ctx, c, req("a", "h1"))
	if err != nil {
		t.Fatal(err)
	}
	if g.Fence < 1 || time.Until(g.Deadline) < 4*time.Second {
		t.Fatalf("bad grant %+v", g)
	}
	_, round, err := c.Acquire(ctx, req("a", "h2"))
	if err != nil || round == nil || !errors.Is(round.Err(), ErrBusy) || round.RetryAfter <= 0 {
		t.Fatalf("second holder: %+v %v, want busy with a retry-after", round, err)
	}
	// Release returns once a majority answered; those answers may include a
	// master where h1's acquire lost a race with h2's, so held may be 1.
	if held, err := c.Release(ctx, "a", "h1"); err != nil || held < 1 {
		t.Fatalf("release: held=%d err=%v", held, err)
	}
	awaitKeys(t, servers, "t:{a}:h:h1")        // h1's release lands on the last master just after
	g2, err := acquire(ctx, c, req("a", "h3")) // holder ids are per attempt
	if err != nil || g2.Fence <= g.Fence {
		t.Fatalf("after release: %+v %v (fence must grow past %d)", g2, err, g.Fence)
	}
	if held, _ := c.Release(ctx, "a", "nobody"); held != 0 {
		t.Fatalf("releasing a non-holder touched %d masters", held)
	}
	holding := 0
	for _, s := range servers {
		holding += s.Keys("t:{a}:h:h3")
	}
	if holding < 2 {
		t.Fatalf("holder key on %d masters, want a majority", holding)
	}
}

// TestAcquireEveryFailureMask pauses every combination of masters: a grant
// needs a majority up, and without it the answer is NO_QUORUM, fast: once
// the paused masters were silent a few of their timeouts.
func TestAcquireEveryFailureMask(t *testing.T) {
	servers := redistest.Start(t, 3)
	c := newCluster(t, servers, time.Second)
	ctx := context.Background()
	for mask := range 1 << len(servers) {
		t.Run(fmt.Sprintf("paused=%03b", mask), func(t *testing.T) {
			for i, s := range servers {
				if mask&(1<<i) != 0 {
					s.Pause()
					defer s.Resume()
				}
			}
			name := fmt.Sprintf("mask%d", mask)
			// A silent master is given up on once it went unheard three of
			// its timeouts (see Trusted): a few hundred ms here, more when a
			// loaded host fires the round's timer late. What must not happen
			// is a paused majority waited for as a slow one is, to the
			// grant's budget (a quarter lease: 1.25s).
			limit := req(name, "h").Lease/4 - c.roundTimeout([]int{0, 1, 2})
			start := time.Now()
			_, err := acquire(ctx, c, req(name, "h"))
			took := time.Since(start)
			if bits.OnesCount(uint(mask)) <= 1 {
				// Liveness: on a loaded host a just-resumed master can miss
				// two probes; the grant must come within a few attempts.
				try, st := 0, c.Status()
				lockagenttest.Eventually(t, 2*time.Second, func() bool {
					if err != nil {
						try++
						_, err = acquire(ctx, c, req(name, fmt.Sprintf("h%d", try)))
						st = c.Status()
					}
					return err == nil
				}, "with a majority up: %v; status %+v", &err, &st)
			} else {
				if !errors.Is(err, ErrNoQuorum) {
					t.Fatalf("with a majority paused: err = %v, want no quorum", err)
				}
				if took > limit {
					t.Fatalf("NO_QUORUM took %v, over %v", took, limit)
				}
			}
		})
		waitStates(t, c, func(st []MasterStatus) bool {
			for _, s := range st {
				if s.State != StateUp {
					return false
				}
			}
			return true
		})
	}
}

// TestFencesGrowAcrossShiftingMajorities grants the same name through every
// majority in turn (the third master paused each time): the counters on the
// masters drift apart, and the write-back keeps every token strictly greater
// than the one before.
func TestFencesGrowAcrossShiftingMajorities(t *testing.T) {
	t.Parallel() // waits out faults and quarantines; judges no latency
	servers := redistest.Start(t, 3)
	c := newCluster(t, servers, time.Second)
	ctx := context.Background()
	var last int64
	for round := range 9 {
		paused := servers[round%3]
		paused.Pause()
		waitStates(t, c, func(st []MasterStatus) bool { return st[round%3].State == StateDown })
		g, holder, err := acquireWithRetries(ctx, c, func(try int) AcquireRequest { return req("f", fmt.Sprintf("h%d-%d", round, try)) })
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if g.Fence <= last {
			t.Fatalf("round %d: fence %d not greater than %d", round, g.Fence, last)
		}
		last = g.Fence
		if _, err := c.Release(ctx, "f", holder); err != nil {
			t.Fatal(err)
		}
		paused.Resume()
		waitStates(t, c, func(st []MasterStatus) bool { return st[round%3].State == StateUp })
	}
}

func TestRenewAndWho(t *testing.T) {
	servers := redistest.Start(t, 3)
	c := newCluster(t, servers, time.Second)
	ctx := context.Background()
	if _, err := acquire(ctx, c, AcquireRequest{Name: "r", Holder: "h1", Lease: 300 * time.Millisecond, Who: Who{Agent: "x", PID: 1, SinceMilli: 42}}); err != nil {
		t.Fatal(err)
	}
	res := c.Renew(ctx, 5*time.Second, []RenewKey{{Name: "r", Holder: "h1"}, {Name: "r", Holder: "ghost"}})
	// The acquire returned once a majority granted; the third may lag.
	if res[0].OK < 2 || res[1].Gone != 3 {
		t.Fatalf("renew results %+v", res)
	}
	time.Sleep(400 * time.Millisecond) // past the first lease: the renewal must have replaced it
	who, err := c.Who(ctx, "r")
	if err != nil || len(who) != 1 || who[0].ID != "h1" || who[0].Record.Who != (Who{Agent: "x", PID: 1, SinceMilli: 42}) || who[0].Record.Fence < 1 || who[0].Record.Claim.Mode != Exclusive {
		t.Fatalf("who = %+v, %v", who, err)
	}
}

func TestWatchWakesOnRelease(t *testing.T) {
	servers := redistest.Start(t, 3)
	c := newCluster(t, servers, time.Second)
	ctx := context.Background()
	waitSubscribed(t, c) // a Watch must confirm on each
	w := c.Watch(ctx, "w")
	defer w.Close()
	drainWake(w)
	if _, err := acquire(ctx, c, req("w", "h")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	c.Release(ctx, "w", "h")
	select {
	case <-w.C():
		t.Logf("woken %v after release", time.Since(start))
	case <-time.After(time.Second):
		t.Fatal("no wake-up after release")
	}
}

func drainWake(w *Watch) {
	for {
		select {
		case <-w.C():
		case <-time.After(50 * time.Millisecond):
			return
		}
	}
}

// TestMasterThatLostItsDataIsQuarantined restarts a master empty: it must
// stop voting for the quarantine period, then vote again.
func TestMasterThatLostItsDataIsQuarantined(t *testing.T) {
	servers := redistest.Start(t, 3)
	c := newCluster(t, servers, 500*time.Millisecond)
	servers[0].Restart()
	waitStates(t, c, func(st []MasterStatus) bool { return st[0].State == StateQuarantined })
	if st := c.Status()[0]; st.QuarantineLeft <= 0 || st.QuarantineLeft > 500*time.Millisecond {
		t.Fatalf("status %+v", st)
	}
	if _, err := acquire(context.Background(), c, req("q", "h")); err != nil {
		t.Fatalf("two voters are a majority: %v", err)
	}
	waitStates(t, c, func(st []MasterStatus) bool { return st[0].State == StateUp })
}

// TestAReleaseThatOvertakesItsAcquireWins plays the reordering that
// reconnects, script reloads and deadlines can cause: the release of an
// attempt lands before the attempt's acquire. The late acquire must be
// refused, not leave a key that blocks the name for a lease.
func TestAReleaseThatOvertakesItsAcquireWins(t *testing.T) {
	servers := redistest.Start(t, 3)
	c := newCluster(t, servers, 5*time.Second)
	ctx := context.Background()
	if _, err := c.Release(ctx, "o", "attempt-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := acquire(ctx, c, req("o", "attempt-1")); err == nil {
		t.Fatal("a released attempt was granted")
	}
	// A master whose release was late (a loaded host) may take the
	// acquire first; the failed acquire's own release then lands there.
	// Either way the key goes well within the 5s lease, so its expiry
	// cannot pass this check.
	awaitKeys(t, servers, "t:{o}:h:attempt-1") // no orphaned holder key
	if _, err := acquire(ctx, c, req("o", "attempt-2")); err != nil {
		t.Fatalf("the name was blocked: %v", err)
	}
}

// waitSubscribed waits until every master's subscriber is up.
func waitSubscribed(t testing.TB, c *Cluster) {
	t.Helper()
	waitStates(t, c, func([]MasterStatus) bool {
		for _, m := range c.masters {
			m.subMu.Lock()
			up := m.sub != nil
			m.subMu.Unlock()
			if !up {
				return false
			}
		}
		return true
	})
}

// TestWatchesWhoseSubscribeFailedAreSubscribedAgain: a master that does
// not confirm a SUBSCRIBE in time (paused, not yet known down) holds up
// the subscriptions of the names watched meanwhile, which wait for their
// turn on the one connection. None of them may be left without messages
// from it for good: each waits its own deadline from its turn, and one
// that fails makes the subscription's connection anew with every watched
// channel once the master answers.
func TestWatchesWhoseSubscribeFailedAreSubscribedAgain(t *testing.T) {
	servers := redistest.Start(t, 3)
	cfg := testConfig(t, servers, time.Second, true)
	c := startCluster(t, cfg)
	subscribed := func(name string) bool {
		n, _ := servers[0].Do("EVAL", "return redis.call('PUBSUB', 'NUMSUB', ARGV[1])[2]", "0", c.keys.Channel(name))
		return n == "1"
	}
	servers[0].Pause()
	names := []string{"a", "b", "c", "d"}
	for _, name := range names {
		w := c.Watch(context.Background(), name)
		defer w.Close()
	}
	time.Sleep(6 * cfg.MasterTimeout) // the pause: past the first SUBSCRIBE's deadline (4×MasterTimeout)
	servers[0].Resume()
	var missing []string
	lockagenttest.Eventually(t, 10*time.Second, func() bool {
		missing = nil
		for _, name := range names {
			if !subscribed(name) {
				missing = append(missing, name)
			}
		}
		return len(missing) == 0
	}, "after a paused master answered again, not subscribed there to %v", &missing)
}

// TestModelCallsCarryTheModelsPlantDecision checks that the model hooks
// put the gate argument where the gate reads it (after the epoch argument)
// and that it carries the model agent's may-plant decision, not the
// Cluster's (which never probed, so may not plant).
func TestModelCallsCarryTheModelsPlantDecision(t *testing.T) {
	c, err := New(Config{Masters: []MasterConfig{{Name: "a"}, {Name: "b"}, {Name: "c"}}, KeyPrefix: "m:",
		Quarantine: 400 * time.Millisecond, Settings: Settings{{"lease", "300ms"}}})
	if err != nil {
		t.Fatal(err)
	}
	req := AcquireRequest{Name: "n", Holder: "h", Lease: time.Second}
	for _, view := range []bool{true, false} {
		want := c.gateArg(view)
		calls := map[string]struct {
			call    ScriptCall
			gateArg int
		}{
			"acquire": {c.ModelAcquire(0, req, view), scripts.Acquire.GateArg},
			"renew":   {c.ModelRenew(0, time.Second, []RenewKey{{Name: "n", Holder: "h"}}, view), scripts.Renew.GateArg},
			"repair":  {c.ModelRepair(0, time.Second, RenewKey{Name: "n", Holder: "h"}, view), scripts.Repair.GateArg},
			"probe":   {c.ModelProbe(0, view, false), scripts.Marker.GateArg},
		}
		for name, k := range calls {
			if got := k.call.Args[k.gateArg+1]; got != want {
				t.Errorf("%s with may-plant %v: gate argument %q, want %q", name, view, got, want)
			}
		}
	}
	if c.gateArgs()[1] != c.gateArg(false) {
		t.Fatalf("the Cluster's own gate argument is not gateArg's: %q", c.gateArgs()[1])
	}
}

func TestModelProbeView(t *testing.T) {
	c, err := New(Config{Masters: []MasterConfig{{Name: "a"}}, Settings: Settings{{"lease", "300ms"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		recorded, refusal string
		want              rules.MarkerView
		ok                bool
	}{
		{"lease=300ms", "", rules.ViewOurs, true},
		{"lease=300ms", "REPLANTED lease=1s", rules.ViewOurs, true},
		{"lease=1s", "SETTINGS lease=1s", rules.ViewOther, true},
		{"", "UNPLANTED", rules.ViewNone, true},
		{"", "ERR something else", rules.ViewUnknown, false},
	} {
		got, ok := c.ModelProbeView(tc.recorded, tc.refusal)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ModelProbeView(%q, %q) = %v, %v; want %v, %v", tc.recorded, tc.refusal, got, ok, tc.want, tc.ok)
		}
	}
}
