package tests

// BenchmarkCompare sets three ways to take a RedLock side by side, in one
// process, over the same three masters:
//
//   - floor: the least any RedLock client must do, written here
//     (compare_contenders_test.go);
//   - redsync: github.com/go-redsync/redsync/v4 over go-redis v9;
//   - agent: lock-agent through its socket, one request at a time.
//
// Every scenario runs for a fixed window (or count), so the whole run takes
// about two minutes:
//
//	go test ./tests -run '^$' -bench '^BenchmarkCompare$' -benchtime 1x -timeout 15m
//
// Compare figures of one run only, as ratios to the floor: the load of the
// machine moves them all.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

const (
	// compareWindow is how long each scenario runs per b.N.
	compareWindow = 5 * time.Second
	// compareWarmup runs a scenario unmeasured first: connections, pools, scripts.
	compareWarmup = 300 * time.Millisecond
	// compareMaxCycles bounds each client's LOCK+UNLOCK cycles per window.
	compareMaxCycles = 1_000_000
	// wakeups is how many releases the wake-up scenario times, within
	// wakeWindow; a waiter is left parked wakePark before each.
	wakeups    = 200
	wakeWindow = 8 * time.Second
	wakePark   = 20 * time.Millisecond
	// compareMaxRefusals bounds how often one LOCK is tried again.
	compareMaxRefusals = 1000
	// compareLockTimeout bounds a LOCK that should be granted at once.
	compareLockTimeout = 10 * time.Second
)

func BenchmarkCompare(b *testing.B) {
	servers := redistest.Start(b, 3)
	// Both configs first: each bootstraps the masters as new ones.
	cfgA := agenttest.Config(b, servers, floorLease)
	cfgA.AgentID = "a"
	cfgB := agenttest.Config(b, servers, floorLease)
	cfgB.AgentID = "b"
	agents := [2]*agenttest.Agent{agenttest.Start(b, cfgA), agenttest.Start(b, cfgB)}
	all := []*contender{newFloor(b, servers), newRedsync(b, servers), newAgentContender(agents)}

	each := func(scenario string, bench func(*testing.B, *contender)) {
		b.Run(scenario, func(b *testing.B) {
			for _, c := range all {
				b.Run(c.name, func(b *testing.B) {
					bench(b, c)
					b.ReportMetric(0, "ns/op") // the window, not a figure
				})
			}
		})
	}
	b.Run("serial", func(b *testing.B) { benchSerial(b, all) })
	each("64-names", benchDistinct)
	each("16-one-name", benchOneName)
	each("16-two-agents", benchTwoAgents)
	b.Run("wakeup", func(b *testing.B) {
		for _, c := range all {
			b.Run(c.name, func(b *testing.B) { benchWakeup(b, c, 0, 0) })
			if c.parked != nil {
				b.Run(c.name+"-across", func(b *testing.B) { benchWakeup(b, c, 0, 1) })
			}
		}
	})
}

// lockAgain locks name as a client would, trying again at once after a
// refusal (see errRefused), until ctx ends; it counts the refusals.
func lockAgain(ctx context.Context, cl locker, name string) (granted bool, refused int, err error) {
	for range compareMaxRefusals {
		granted, err = cl.lock(ctx, name)
		if !errors.Is(err, errRefused) {
			return granted, refused, err
		}
		refused++
		if ctx.Err() != nil {
			return false, refused, nil
		}
	}
	return false, refused, err
}

// lockCycle locks and unlocks name, which must be free, and returns how
// many times the LOCK was refused on the way.
func lockCycle(b *testing.B, cl locker, name string) int {
	ctx, cancel := context.WithTimeout(context.Background(), compareLockTimeout)
	defer cancel()
	ok, refused, err := lockAgain(ctx, cl, name)
	if err != nil || !ok {
		b.Fatalf("lock %s: granted %v, %v", name, ok, err)
	}
	if err := cl.unlock(name); err != nil {
		b.Fatal(err)
	}
	return refused
}

// serialBlock is how many LOCK+UNLOCK cycles one contender runs in turn
// in the serial scenario before the next one takes over.
const serialBlock = 100

// benchSerial: one client of each contender locking and unlocking a free
// name: LOCK+UNLOCK latency. The contenders take turns in short blocks
// over one window three times as long, not one window each: a slow spell
// of the host then falls on all of them alike, and their ratio holds from
// run to run.
func benchSerial(b *testing.B, all []*contender) {
	clients := make([]locker, len(all))
	for i, c := range all {
		clients[i] = c.client(b, 0)
		for range 20 {
			lockCycle(b, clients[i], "serial")
		}
	}
	samples := make([][]time.Duration, len(all))
	refused := make([]int, len(all))
	for range b.N {
		end := time.Now().Add(time.Duration(len(all)) * compareWindow)
		for turn := 0; turn < compareMaxCycles/serialBlock && time.Now().Before(end); turn++ {
			i := turn % len(all)
			for range serialBlock {
				start := time.Now()
				refused[i] += lockCycle(b, clients[i], "serial")
				samples[i] = append(samples[i], time.Since(start))
			}
		}
	}
	for i, c := range all {
		b.Run(c.name, func(b *testing.B) {
			report(b, "", samples[i])
			b.ReportMetric(float64(refused[i]), "refused")
			b.ReportMetric(0, "ns/op") // the window, not a figure
		})
	}
}

// workload is what workers locking and unlocking names for a window did.
type workload struct {
	grants  []int         // per worker
	refused []int         // per worker: LOCKs refused, and tried again
	maxWait time.Duration // the longest LOCK, counting one cut off by the window
	took    time.Duration // until the last worker stopped
}

func (c workload) perSecond() float64 {
	total := 0
	for _, g := range c.grants {
		total += g
	}
	return float64(total) / c.took.Seconds()
}

func (c workload) report(b *testing.B) {
	b.ReportMetric(c.perSecond(), "cycles/s")
	total := 0
	for _, r := range c.refused {
		total += r
	}
	b.ReportMetric(float64(total), "refused")
}

// add sums another window of the same workers into c.
func (c *workload) add(o workload) {
	if c.grants == nil {
		c.grants = make([]int, len(o.grants))
		c.refused = make([]int, len(o.refused))
	}
	for i, g := range o.grants {
		c.grants[i] += g
		c.refused[i] += o.refused[i]
	}
	c.maxWait = max(c.maxWait, o.maxWait)
	c.took += o.took
}

// runWorkers runs one worker per client, each locking and unlocking
// names[worker] with no pause, for d. It fails if two workers ever hold a
// name at once: a fast lock that does not exclude is no contender.
func runWorkers(b *testing.B, clients []locker, names []string, d time.Duration) workload {
	out := workload{grants: make([]int, len(clients)), refused: make([]int, len(clients))}
	waits := make([]time.Duration, len(clients))
	holders := map[string]*atomic.Int32{}
	for _, name := range names {
		holders[name] = new(atomic.Int32)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for i, cl := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < compareMaxCycles && ctx.Err() == nil; n++ {
				t0 := time.Now()
				ok, refused, err := lockAgain(ctx, cl, names[i])
				waits[i] = max(waits[i], time.Since(t0))
				out.refused[i] += refused
				if err != nil {
					b.Error(err)
					return
				}
				if !ok {
					return // the window ended while waiting
				}
				out.grants[i]++
				if h := holders[names[i]].Add(1); h != 1 {
					b.Errorf("%d holders of %s at once", h, names[i])
				}
				holders[names[i]].Add(-1) // before the release, which lets the next one in
				if err := cl.unlock(names[i]); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	out.took = time.Since(start)
	out.maxWait = slices.Max(waits)
	return out
}

// measureWorkers warms the workers up, then runs b.N windows of them.
// Each window has names of its own: a redsync Lock cut off by the end of a
// window can leave its name held in the masters until its expiry (8s),
// since it releases with the context that just ended.
func measureWorkers(b *testing.B, clients []locker, names []string) workload {
	inWindow := func(window string) []string {
		out := make([]string, len(names))
		for i, name := range names {
			out[i] = name + "/" + window
		}
		return out
	}
	runWorkers(b, clients, inWindow("warmup"), compareWarmup)
	var sum workload
	b.ResetTimer()
	for i := range b.N {
		sum.add(runWorkers(b, clients, inWindow(strconv.Itoa(i)), compareWindow))
	}
	b.StopTimer()
	return sum
}

// makeClients returns n clients of c, the first half in group 0 and the rest in
// group 1 when split, else all in group 0.
func makeClients(b *testing.B, c *contender, n int, split bool) []locker {
	out := make([]locker, n)
	for i := range out {
		group := 0
		if split && i >= n/2 {
			group = 1
		}
		out[i] = c.client(b, group)
	}
	return out
}

// benchDistinct: 64 clients of one host, each on its own name: throughput.
func benchDistinct(b *testing.B, c *contender) {
	names := make([]string, 64)
	for i := range names {
		names[i] = fmt.Sprintf("distinct/%d", i)
	}
	r := measureWorkers(b, makeClients(b, c, len(names), false), names)
	r.report(b)
}

// repeatName returns n copies of name.
func repeatName(name string, n int) []string {
	return slices.Repeat([]string{name}, n)
}

// benchOneName: 16 clients of one host (one agent) on one name:
// throughput, fairness between the clients, and the longest wait.
func benchOneName(b *testing.B, c *contender) {
	r := measureWorkers(b, makeClients(b, c, 16, false), repeatName("one", 16))
	r.report(b)
	most, least := slices.Max(r.grants), slices.Min(r.grants)
	b.ReportMetric(float64(least), "min-grants")
	if least > 0 {
		b.ReportMetric(float64(most)/float64(least), "max/min-grants")
	}
	b.ReportMetric(float64(r.maxWait.Microseconds())/1000, "max-wait-ms")
}

// benchTwoAgents: 16 clients on one name, 8 on each of two agents (for the
// floor and redsync, two groups of 8): throughput, each group's share of
// the grants, and the longest wait.
func benchTwoAgents(b *testing.B, c *contender) {
	r := measureWorkers(b, makeClients(b, c, 16, true), repeatName("two", 16))
	r.report(b)
	var groups [2]int
	for i, g := range r.grants {
		groups[i/8] += g
	}
	if total := groups[0] + groups[1]; total > 0 {
		b.ReportMetric(100*float64(groups[0])/float64(total), "a-share-%")
		b.ReportMetric(100*float64(groups[1])/float64(total), "b-share-%")
	}
	b.ReportMetric(float64(r.maxWait.Microseconds())/1000, "max-wait-ms")
}

// benchWakeup: a waiter (of group waiterGroup) parked on a name held by a
// holder (of holderGroup); the time from the holder's release being sent
// to the waiter's grant being received.
func benchWakeup(b *testing.B, c *contender, holderGroup, waiterGroup int) {
	holder, waiter := c.client(b, holderGroup), c.client(b, waiterGroup)
	lockCycle(b, holder, "wake")
	lockCycle(b, waiter, "wake")
	refused := 0
	var samples []time.Duration
	// The timer runs throughout, so that b.N stays 1 under the default
	// -benchtime too.
	b.ResetTimer()
	for range b.N {
		end := time.Now().Add(wakeWindow)
		for n := 0; n < wakeups && time.Now().Before(end); n++ {
			took, r := wakeOnce(b, c, holder, waiter, waiterGroup)
			samples = append(samples, took)
			refused += r
		}
	}
	b.StopTimer()
	report(b, "", samples)
	b.ReportMetric(float64(refused), "refused")
	b.ReportMetric(0, "ns/op")
}

// wakeOnce times one hand-over of "wake" from holder to waiter, and
// counts the LOCKs refused on the way.
func wakeOnce(b *testing.B, c *contender, holder, waiter locker, waiterGroup int) (time.Duration, int) {
	ctx, cancel := context.WithTimeout(context.Background(), compareLockTimeout)
	defer cancel()
	ok, refused, err := lockAgain(ctx, holder, "wake")
	if !ok || err != nil {
		b.Fatalf("holder: granted %v, %v", ok, err)
	}
	granted := make(chan time.Time, 1)
	waiterRefused := 0
	go func() {
		defer close(granted)
		var ok bool
		var err error
		ok, waiterRefused, err = lockAgain(ctx, waiter, "wake")
		if !ok || err != nil {
			b.Errorf("waiter: granted %v, %v", ok, err)
			return
		}
		granted <- time.Now()
	}()
	if c.parked != nil {
		c.parked(b, waiterGroup)
	}
	time.Sleep(wakePark)
	released := time.Now()
	if err := holder.unlock("wake"); err != nil {
		b.Fatal(err)
	}
	at, ok := <-granted
	if !ok {
		b.FailNow()
	}
	if err := waiter.unlock("wake"); err != nil {
		b.Fatal(err)
	}
	return at.Sub(released), refused + waiterRefused
}
