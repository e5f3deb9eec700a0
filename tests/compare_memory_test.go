package tests

import (
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/redistest"
)

// The memory scenario of BenchmarkCompare: what an agent process costs
// its host for many holds, read from outside as an operator reads it.

const (
	// memorySessions × memoryHoldsPer is the burst of pipelined LOCKs.
	memorySessions = 100
	memoryHoldsPer = 1000
	// memorySettle is how long after the burst its resident set is read:
	// the burst's own garbage is the process's too until the Go runtime
	// returns it, and the figure is meant to include what remains then.
	memorySettle = 2 * time.Second
	// memoryCPUWindow is how long the CPU of renewing the holds is read
	// over: the default lease, which is three renewal rounds.
	memoryCPUWindow = 15 * time.Second
)

// benchAgentMemory: one agent process with the default lock settings over
// masters of its own, 100 sessions each pipelining 1,000 LOCKs of distinct
// names. It reports the agent's resident set (VmRSS) per hold above the
// idle agent's, memorySettle after the burst (and again memoryCPUWindow
// later, as "late"), its peak (VmHWM) during the burst, and the share of
// one core the agent spends renewing them all (utime+stime over
// memoryCPUWindow). The sleeps are the measurement's definition, not a
// wait for an event.
func benchAgentMemory(b *testing.B) {
	for range b.N {
		servers := redistest.Start(b, 3)
		a := startProcAgents(b, releaseBinary(b), servers, "", "memory")[0]
		idle := rssBytes(b, a.pid())
		r := pipelineLocks(b, a.sock, memorySessions, memoryHoldsPer, "memory")
		holds := memorySessions * memoryHoldsPer
		if r.granted != holds || r.lost > 0 {
			b.Fatalf("%d of %d granted, %d lost; first refusal: %s", r.granted, holds, r.lost, r.first)
		}
		time.Sleep(memorySettle)
		held := rssBytes(b, a.pid())
		cpu0, t0 := cpuTime(b, a.pid()), time.Now()
		time.Sleep(memoryCPUWindow)
		cpu := cpuTime(b, a.pid()) - cpu0
		late := rssBytes(b, a.pid())
		b.ReportMetric(float64(holds)/r.took.Seconds(), "locks/s")
		b.ReportMetric(float64(idle)/(1<<20), "idle-MiB")
		b.ReportMetric(float64(held)/(1<<20), "held-MiB")
		b.ReportMetric(float64(peakRSSBytes(b, a.pid()))/(1<<20), "peak-MiB")
		b.ReportMetric(float64(held-idle)/float64(holds), "B/hold")
		b.ReportMetric(float64(late-idle)/float64(holds), "late-B/hold")
		b.ReportMetric(100*cpu.Seconds()/time.Since(t0).Seconds(), "renew-cpu-%")
	}
	b.ReportMetric(0, "ns/op")
}
