package tests

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The scenarios of BenchmarkCompare in which many clients lock and unlock
// at once for a window.

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
// names[worker] with no pause, for d; with fresh, each cycle's name is a
// new one under names[worker] instead. It fails if two workers ever hold a
// name at once: a fast lock that does not exclude is no contender.
func runWorkers(b *testing.B, clients []locker, names []string, fresh bool, d time.Duration) workload {
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
		w := worker{client: cl, name: names[i], fresh: fresh, holders: holders[names[i]]}
		wg.Go(func() {
			w.run(ctx, b)
			out.grants[i], out.refused[i], waits[i] = w.grants, w.refused, w.maxWait
		})
	}
	wg.Wait()
	out.took = time.Since(start)
	out.maxWait = slices.Max(waits)
	return out
}

// worker is one client of runWorkers.
type worker struct {
	client  locker
	name    string
	fresh   bool
	holders *atomic.Int32 // of name, shared with the other workers on it

	grants, refused int
	maxWait         time.Duration // the longest LOCK, counting one cut off by ctx
}

// run locks and unlocks until ctx ends.
func (w *worker) run(ctx context.Context, b *testing.B) {
	for n := 0; n < compareMaxCycles && ctx.Err() == nil; n++ {
		name := w.name
		if w.fresh {
			name += "/" + strconv.Itoa(n)
		}
		start := time.Now()
		ok, refused, err := lockAgain(ctx, w.client, name)
		w.maxWait = max(w.maxWait, time.Since(start))
		w.refused += refused
		if err != nil {
			b.Error(err)
			return
		}
		if !ok {
			return // the window ended while waiting
		}
		w.grants++
		w.holders.Add(1)
		// Let the other workers run while this one holds: a second grant
		// of the name comes in now, if the lock lets it.
		runtime.Gosched()
		if h := w.holders.Load(); h != 1 {
			b.Errorf("%d holders of %s at once", h, w.name)
		}
		w.holders.Add(-1) // before the release, which lets the next one in
		if err := w.client.unlock(name); err != nil {
			b.Error(err)
			return
		}
	}
}

// measureWorkers warms the workers up, then runs b.N windows of them.
// Each window has names of its own: a redsync Lock cut off by the end of a
// window can leave its name held in the masters until its expiry (8s),
// since it releases with the context that just ended.
func measureWorkers(b *testing.B, clients []locker, names []string, fresh bool) workload {
	inWindow := func(window string) []string {
		out := make([]string, len(names))
		for i, name := range names {
			out[i] = name + "/" + window
		}
		return out
	}
	runWorkers(b, clients, inWindow("warmup"), fresh, compareWarmup)
	var sum workload
	b.ResetTimer()
	for i := range b.N {
		sum.add(runWorkers(b, clients, inWindow(strconv.Itoa(i)), fresh, compareWindow))
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

// benchDistinct: 64 clients of one host, each on its own name, again and
// again: throughput.
func benchDistinct(b *testing.B, c *contender) { benchSixtyFour(b, c, false) }

// benchDistinctFresh: 64 clients of one host, each on a fresh name every
// cycle: throughput when no name is ever used twice.
func benchDistinctFresh(b *testing.B, c *contender) { benchSixtyFour(b, c, true) }

func benchSixtyFour(b *testing.B, c *contender, fresh bool) {
	names := make([]string, 64)
	for i := range names {
		names[i] = fmt.Sprintf("distinct/%d", i)
	}
	r := measureWorkers(b, makeClients(b, c, len(names), false), names, fresh)
	r.report(b)
}

// repeatName returns n copies of name.
func repeatName(name string, n int) []string {
	return slices.Repeat([]string{name}, n)
}

// benchOneName: 16 clients of one host (one agent) on one name:
// throughput, fairness between the clients, and the longest wait.
func benchOneName(b *testing.B, c *contender) {
	r := measureWorkers(b, makeClients(b, c, 16, false), repeatName("one", 16), false)
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
	r := measureWorkers(b, makeClients(b, c, 16, true), repeatName("two", 16), false)
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
