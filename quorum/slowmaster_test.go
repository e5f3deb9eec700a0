package quorum

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/history"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// Rounds wait past a master's timeout while the probe trusts it (see
// Patience). These tests try to make that waiting unsafe or unbounded with
// real paused masters.

// TestPausedMastersNeitherOverlapNorLeakHolds: clients contend for a few
// names while a nemesis pauses one or two masters at a time, for less than
// a round's budget and for more, and resumes them: answers that come after
// a round waited for them (or gave up) must not let two holders overlap, and
// once every master is back no hold outlives its release (the lease is long,
// so an expiry cannot hide a leak).
func TestPausedMastersNeitherOverlapNorLeakHolds(t *testing.T) {
	t.Parallel() // waits out faults and quarantines; judges no latency
	servers := redistest.Start(t, 3)
	c := newCluster(t, servers, time.Second)
	const lease = 30 * time.Second
	names := []string{"p0", "p1"}
	h := history.New()
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var mu sync.Mutex
	var worstRefusal time.Duration
	grants := 0
	for client := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for try := 0; ctx.Err() == nil; try++ {
				name := names[try%len(names)]
				holder := fmt.Sprintf("c%d-%d", client, try)
				h.Add(history.Event{Client: client, Type: history.Invoke, Kind: "exclusive", Name: name})
				start := time.Now()
				g, err := acquire(context.Background(), c, AcquireRequest{Name: name, Holder: holder, Lease: lease, Who: Who{Agent: "t", Owner: holder}})
				if err != nil {
					h.Add(history.Event{Client: client, Type: history.Fail, Kind: "exclusive", Name: name, Detail: err.Error()})
					if errors.Is(err, ErrNoQuorum) {
						mu.Lock()
						worstRefusal = max(worstRefusal, time.Since(start))
						mu.Unlock()
					}
					continue
				}
				h.Add(history.Event{Client: client, Type: history.OK, Kind: "exclusive", Name: name, Fence: g.Fence})
				mu.Lock()
				grants++
				mu.Unlock()
				time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond) // the client's work while it holds
				h.Add(history.Event{Client: client, Type: history.Release, Kind: "exclusive", Name: name, Fence: g.Fence})
				c.Release(context.Background(), name, holder)
			}
		}()
	}
	budget := c.patience()
	pauses := []time.Duration{30 * time.Millisecond, 150 * time.Millisecond, 600 * time.Millisecond, budget + 500*time.Millisecond}
	for round := range 8 {
		which := []int{rand.IntN(3)}
		if round%3 == 2 { // a majority paused
			which = append(which, (which[0]+1)%3)
		}
		d := pauses[round%len(pauses)]
		h.Add(history.Event{Type: history.Info, Detail: fmt.Sprintf("pause %v for %v", which, d)})
		redistest.PauseFor(d, servers, which...)
		h.Add(history.Event{Type: history.Info, Detail: "resumed"})
		time.Sleep(200 * time.Millisecond) // let the clients run between faults
	}
	stop()
	wg.Wait()
	report := history.Check(h.Events(), 10*time.Second)
	t.Logf("%d grants; the slowest NO_QUORUM took %v (budget %v)", grants, worstRefusal, budget)
	if err := report.Err(); err != nil {
		t.Fatal(err)
	}
	if grants == 0 {
		t.Fatal("no grant at all")
	}
	// Releases and give-backs land on the resumed masters in the background.
	for _, name := range names {
		awaitKeysFor(t, servers, "t:{"+name+"}:h:*", 5*time.Second)
	}
}

// awaitKeysFor waits until no master has a key of pattern, at most d.
func awaitKeysFor(t *testing.T, servers []*redistest.Server, pattern string, d time.Duration) {
	t.Helper()
	var left []string
	lockagenttest.Eventually(t, d, func() bool {
		left = left[:0]
		for i, s := range servers {
			if n := s.Keys(pattern); n > 0 {
				keys, _ := s.Do("KEYS", pattern)
				left = append(left, fmt.Sprintf("m%d: %d (%s)", i, n, keys))
			}
		}
		return len(left) == 0
	}, "keys of %s left behind: %v", pattern, &left)
}

// TestEveryMasterPausedIsNoQuorumInBoundedTime: with every master paused,
// acquires and releases in flight at once answer within the round's budget,
// both just after the pause (the probe still trusts the masters) and after
// the probe doubts them; and waiting does not pile up goroutines while the
// masters stay paused.
func TestEveryMasterPausedIsNoQuorumInBoundedTime(t *testing.T) {
	servers := redistest.Start(t, 3)
	c := newCluster(t, servers, time.Second)
	ctx := context.Background()
	for i := range 20 { // answers read: each master has an estimate
		if _, err := acquire(ctx, c, req(fmt.Sprintf("warm%d", i), "h")); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range servers {
		s.Pause()
		defer s.Resume()
	}
	budget := c.patience()
	measure := func(phase string) time.Duration {
		var wg sync.WaitGroup
		var mu sync.Mutex
		var worst time.Duration
		for i := range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				start := time.Now()
				var err error
				if i%4 == 3 {
					_, err = c.Release(ctx, fmt.Sprintf("warm%d", i%20), "h")
				} else {
					_, err = acquire(ctx, c, req(fmt.Sprintf("%s%d", phase, i), "h"))
				}
				took := time.Since(start)
				if !errors.Is(err, ErrNoQuorum) {
					t.Errorf("%s: err = %v, want no quorum", phase, err)
				}
				mu.Lock()
				worst = max(worst, took)
				mu.Unlock()
			}()
		}
		wg.Wait()
		t.Logf("%s: the slowest of 32 NO_QUORUM answers took %v (roundTimeout %v, budget %v)", phase, worst, c.roundTimeout([]int{0, 1, 2}), budget)
		return worst
	}
	// admission may hold some back a round or two: half a budget of slack
	if worst := measure("fresh"); worst > budget+budget/2 {
		t.Fatalf("just after the pause, NO_QUORUM took %v, over the budget %v", worst, budget)
	}
	waitStates(t, c, func(st []MasterStatus) bool {
		for _, s := range st {
			if s.State == StateUp {
				return false
			}
		}
		return true
	})
	before := goroutinesIn("quorum.")
	if worst := measure("doubted"); worst > 3*c.roundTimeout([]int{0, 1, 2}) {
		t.Fatalf("once the probe doubts every master, NO_QUORUM took %v, over 3 of their timeouts", worst)
	}
	for range 5 {
		measure("again")
	}
	after := goroutinesIn("quorum.")
	t.Logf("goroutines in quorum: %d, then %d after 6 more bursts", before, after)
	if after > before+200 {
		t.Fatalf("goroutines in quorum grew from %d to %d while the masters stayed paused", before, after)
	}
}

// TestAFastFailingMasterAndTwoSlowOnes: one master refuses every write at
// once (out of memory) while the other two are slow (paused 150ms of every
// 170ms): a grant needs both slow ones, and comes, its validity counted
// from the round's start, not from the late answers.
func TestAFastFailingMasterAndTwoSlowOnes(t *testing.T) {
	servers := redistest.Start(t, 3)
	c := newCluster(t, servers, time.Second)
	ctx := context.Background()
	if _, err := servers[0].Do("CONFIG", "SET", "maxmemory", "1"); err != nil {
		t.Fatal(err)
	}
	defer servers[0].Do("CONFIG", "SET", "maxmemory", "0")
	slowCtx, stopSlow := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for slowCtx.Err() == nil {
			redistest.PauseFor(150*time.Millisecond, servers, 1, 2) // then the queued calls run
			time.Sleep(20 * time.Millisecond)
		}
	}()
	defer func() { stopSlow(); wg.Wait() }()
	granted, refused := 0, 0
	var slowest time.Duration
	var refusals []string
	for i := range 20 {
		r := req(fmt.Sprintf("f%d", i), "h")
		start := time.Now()
		g, err := acquire(ctx, c, r)
		took := time.Since(start)
		slowest = max(slowest, took)
		if err != nil {
			refused++
			refusals = append(refusals, err.Error())
			continue
		}
		granted++
		if latest := start.Add(r.Lease); g.Deadline.After(latest) {
			t.Fatalf("grant valid until %v, after the call's start + lease %v (took %v)", g.Deadline, latest, took)
		}
		if n := mastersWith(servers[1:], func(s *redistest.Server) bool { return s.Keys("t:{"+r.Name+"}:h:h") > 0 }); n != 2 {
			t.Fatalf("granted, but the hold is on %d of the two masters that can hold it", n)
		}
	}
	if n := servers[0].Keys("t:{f*}:h:*"); n != 0 {
		keys, _ := servers[0].Do("KEYS", "t:{f*}:h:*")
		t.Fatalf("the master out of memory holds %d keys (%s): it did not refuse", n, keys)
	}
	t.Logf("%d granted, %d refused, slowest %v; refusals %s", granted, refused, slowest, strings.Join(refusals, "; "))
	if refused > 0 {
		t.Fatalf("%d of 20 acquires refused with two slow but live masters", refused)
	}
}

// TestAPauseResumedMidRoundDoesNotStretchTheNextOutage: a master paused
// while a round needs it, and resumed before the round gave up on it,
// answers that round after its pause: that answer says nothing of how long
// the master takes to answer (the round cannot tell it from a slow one), so
// it must not stretch the master's timeout. Else the master's next outage
// is waited out for three of the stretched timeouts, and each pause resumed
// in time stretches it more, up to the budget.
//
// The cluster does not know the host's CPU pressure (no Config.HostWaited,
// as every test cluster here): on a host short of CPU, a round waits for a
// silent master until the probe doubts it, whatever its timeout says
// (TestASilentMasterIsWaitedForWhileTheHostIsShortOfCPU).
func TestAPauseResumedMidRoundDoesNotStretchTheNextOutage(t *testing.T) {
	servers := redistest.Start(t, 3)
	c := newCluster(t, servers, time.Second)
	ctx := context.Background()
	for i := range 20 {
		if _, err := acquire(ctx, c, req(fmt.Sprintf("warm%d", i), "h")); err != nil {
			t.Fatal(err)
		}
	}
	before := c.masters[0].timeout()
	limit := 5 * c.roundTimeout([]int{0, 1, 2}) // as TestAcquireEveryFailureMask bounds a NO_QUORUM
	servers[1].Pause()                          // for the whole test: every round needs m0
	defer servers[1].Resume()
	for cycle := range 3 {
		// m0 paused for less than a round waits for it (three of its
		// timeouts), resumed while a round waits: the round is granted.
		servers[0].Pause()
		granted := make(chan error, 1)
		go func() { _, err := acquire(ctx, c, req(fmt.Sprintf("mid%d", cycle), "h")); granted <- err }()
		time.Sleep(2 * before) // the fault's length
		servers[0].Resume()
		if err := <-granted; err != nil {
			t.Logf("cycle %d: the round across m0's pause was refused: %v", cycle, err)
		}
		t.Logf("cycle %d: m0's timeout %v (it was %v)", cycle, c.masters[0].timeout(), before)
	}
	// m0's next outage, with m1 still paused: NO_QUORUM as soon as before.
	servers[0].Pause()
	defer servers[0].Resume()
	start := time.Now()
	_, err := acquire(ctx, c, req("after", "h"))
	took := time.Since(start)
	t.Logf("NO_QUORUM after the pauses took %v (limit %v; m0's timeout %v, it was %v)", took, limit, c.masters[0].timeout(), before)
	if !errors.Is(err, ErrNoQuorum) {
		t.Fatalf("err = %v, want no quorum", err)
	}
	if took > limit {
		t.Fatalf("NO_QUORUM took %v, over %v: m0's earlier pauses stretched its timeout to %v (from %v)", took, limit, c.masters[0].timeout(), before)
	}
}

// TestASilentMasterIsWaitedForWhileTheHostIsShortOfCPU: a round needs a
// master (one of two) that falls silent for 400 ms, more than twice the
// three of its timeouts (50 ms, the floor, on a quiet host) it is trusted
// for. While the host has CPU
// to spare, the round gives up on it after those (a paused master costs
// what it did); while the host's tasks wait for a CPU (Config.HostWaited,
// here a host where some task always waits), its silence is not counted,
// as that of a master starved of CPU beside a busy host's other work:
// the round waits, and is granted once the master answers.
func TestASilentMasterIsWaitedForWhileTheHostIsShortOfCPU(t *testing.T) {
	servers := redistest.Start(t, 2)
	var starved sync.Mutex
	var since time.Time // the host is short of CPU from since on; zero: it is not
	cfg := testConfig(t, servers, time.Second, true)
	cfg.MasterTimeout = 50 * time.Millisecond
	cfg.ProbeInterval = time.Hour // no probe doubts the master: a round's own rule alone
	cfg.HostWaited = func() (time.Duration, bool) {
		starved.Lock()
		defer starved.Unlock()
		if since.IsZero() {
			return time.Minute, true
		}
		return time.Minute + time.Since(since), true
	}
	c := startCluster(t, cfg)
	ctx := context.Background()
	for i := range 20 { // answers read: each master has an estimate
		if _, err := acquire(ctx, c, req(fmt.Sprintf("warm%d", i), "h")); err != nil {
			t.Fatal(err)
		}
	}
	// Silent for twice as long as a round trusts it: three of its timeouts
	// and a step (its estimate may be above the 50 ms floor on a busy host).
	budget := c.patience()
	silence := max(400*time.Millisecond, 2*(3*c.masters[1].timeout()+c.roundTimeout([]int{0, 1})))
	if silence > budget*3/4 {
		t.Skipf("m1's timeout is %v: a silence twice what a round trusts it for (%v) does not fit its budget %v", c.masters[1].timeout(), silence, budget)
	}
	try := func(name string) (err error, took, resumedAfter time.Duration) {
		servers[1].Pause()
		start := time.Now()
		done := make(chan error, 1)
		go func() { _, err := acquire(ctx, c, req(name, "h")); done <- err }()
		select {
		case err = <-done:
		case <-time.After(silence):
		}
		servers[1].Resume()
		resumedAfter = time.Since(start)
		if err == nil {
			err = <-done
		}
		return err, time.Since(start), resumedAfter
	}

	err, took, _ := try("quiet")
	t.Logf("host with CPU to spare: %v after %v (m1's timeout %v, roundTimeout %v)", err, took, c.masters[1].timeout(), c.roundTimeout([]int{0, 1}))
	if !errors.Is(err, ErrNoQuorum) || took >= silence {
		t.Fatalf("with CPU to spare, a master silent for %v: %v after %v (its timeout %v), want NO_QUORUM before it answers", silence, err, took, c.masters[1].timeout())
	}

	starved.Lock()
	since = time.Now()
	starved.Unlock()
	for attempt := 0; ; attempt++ {
		err, took, resumedAfter := try(fmt.Sprintf("starved%d", attempt))
		t.Logf("host short of CPU: %v after %v (resumed after %v, budget %v)", err, took, resumedAfter, budget)
		if err == nil {
			break
		}
		if resumedAfter < budget-budget/4 || attempt == 5 {
			t.Fatalf("with the host short of CPU, a master silent for %v (resumed after %v): %v, want a grant once it answers", silence, resumedAfter, err)
		}
		// This host resumed the master too late for the round's budget:
		// the condition was not made; again.
	}
}

// TestARoundOfAnEndedRequestIsNotSent: a request whose context ended (its
// session closed) before its round's turn gets no round, though turns are
// free: no master hears of it. A closing session waits for its requests,
// and a storm's WHOs queued in turn each ran a round after the client left
// (TestHostilePipelineClosedMidway, beside two CPU hogs: the session still
// open 5 s after its connection closed).
func TestARoundOfAnEndedRequestIsNotSent(t *testing.T) {
	servers := redistest.Start(t, 3)
	c := newCluster(t, servers, time.Second)
	var mu sync.Mutex
	var seen []string
	after := make(chan struct{})
	servers[0].Monitor(func(cmd redistest.Command) bool {
		line := strings.Join(cmd.Args, " ")
		if strings.Contains(line, "{after}") {
			close(after)
			return false
		}
		if strings.Contains(line, "{ended}") {
			mu.Lock()
			seen = append(seen, line)
			mu.Unlock()
		}
		return true
	})
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Who(ended, "ended"); !errors.Is(err, context.Canceled) {
		t.Errorf("WHO of an ended request: %v, want it cancelled", err)
	}
	if _, err := acquire(ended, c, req("ended", "h")); !errors.Is(err, context.Canceled) {
		t.Errorf("acquire of an ended request: %v, want it cancelled", err)
	}
	// The same connection carries a later round after them: once master 0
	// ran it, it ran whatever came before.
	if _, err := c.Who(context.Background(), "after"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-after:
	case <-time.After(10 * time.Second):
		t.Fatal("master 0 never ran the later WHO")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) > 0 {
		t.Fatalf("master 0 ran %d commands of ended requests: %q", len(seen), seen)
	}
}
