// Package memory gives the heap a burst of requests left behind back to
// the OS once the agent is quiet again.
package memory

import (
	"context"
	"runtime/debug"
	runtimemetrics "runtime/metrics"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Trimmer gives the memory a burst left behind back to the OS once
// the agent is quiet again. Go keeps freed heap, and the stacks of
// finished goroutines, resident for reuse until a GC cycle lowers its heap
// goal and its scavenger releases what is above it; but an agent that
// took 100,000 holds in a burst and then only renews them allocates too
// little to start a GC for minutes (Go forces one every two). Until then
// top showed 3.5-17 KiB per hold, of which ~600 B were live: the rest was
// the burst's garbage, its goroutines' stacks (one per pipelined LOCK
// until its round ends), and a heap goal set while they were in flight.
//
// So after a burst (at least Burst bytes allocated since the last trim)
// that is over (under Quiet bytes allocated in each of the last two
// Intervals: a renewal of 100,000 holds allocates less, a busy agent
// more), it runs one GC and releases every free page (debug.FreeOSMemory).
// Under steady load it never trims: the agent is never quiet, and its GC
// cycles keep the heap goal near twice what is live. A trim costs one GC
// cycle per Burst bytes allocated, which is no more than the GC runs anyway.
type Trimmer struct {
	Interval time.Duration // how often it looks; default 250ms
	Burst    uint64        // default 64 MiB
	Quiet    uint64        // default 8 MiB
	log      hclog.Logger
	// looks, if not nil, paces the looks instead of Interval (a test's).
	looks <-chan time.Time
}

const allocsMetric = "/gc/heap/allocs:bytes"

// NewTrimmer is a Trimmer with the defaults: a look every 250ms, a burst
// of 64 MiB, quiet under 8 MiB.
func NewTrimmer(log hclog.Logger) *Trimmer {
	return &Trimmer{Interval: 250 * time.Millisecond, Burst: 64 << 20, Quiet: 8 << 20, log: log}
}

// Run trims until ctx ends. Its ticks are the host's time, not the
// agent's clock: they pace a look at the runtime, not a lease.
func (m *Trimmer) Run(ctx context.Context) error {
	looks := m.looks
	if looks == nil {
		tick := time.NewTicker(m.Interval)
		defer tick.Stop()
		looks = tick.C
	}
	sample := []runtimemetrics.Sample{{Name: allocsMetric}}
	allocated := func() uint64 {
		runtimemetrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	trimmed := allocated()
	before, last := trimmed, trimmed
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-looks:
		}
		now := allocated()
		if m.due(trimmed, before, last, now) {
			start := time.Now()
			debug.FreeOSMemory()
			m.log.Debug("returned free memory to the OS after a burst", "allocated_mib", (now-trimmed)>>20, "took", time.Since(start))
			trimmed = allocated()
			now = trimmed
		}
		before, last = last, now
	}
}

// due says whether to trim, given the bytes allocated in all at the last
// trim, at the two looks before this one, and now. Two quiet intervals in
// a row, not one: a burst's requests may all be waiting for the masters
// for a moment, and a trim then would cost a GC of the burst's whole heap
// in the middle of it.
func (m *Trimmer) due(trimmed, before, last, now uint64) bool {
	return now-trimmed >= m.Burst && now-last < m.Quiet && last-before < m.Quiet
}
