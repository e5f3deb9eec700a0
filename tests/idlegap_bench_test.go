package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/redistest"
)

// BenchmarkIdleGap is what an idle gap costs a cached cycle: one client of
// an agent in its own process cycles through 64 cached names, in a tight
// loop and with 200µs of work (a CPU spin) after each cycle, and reports
// the cycle's p50 beside the agent's CPU and its threads' context switches
// per cycle (from /proc: each switch a thread that slept and was woken, or
// was preempted). A cycle after a gap finds the agent's threads asleep:
//
//	go test ./tests -run '^$' -bench '^BenchmarkIdleGap$' -benchtime 1x
func BenchmarkIdleGap(b *testing.B) {
	servers := redistest.Start(b, 3)
	agents := startProcAgents(b, releaseBinary(b), servers, compareLock, "a")
	pid := agents[0].pid()
	for _, work := range []time.Duration{0, serialWork} {
		b.Run(fmt.Sprintf("work-%v", work), func(b *testing.B) {
			cl := dialLine(b, agents[0].sock)
			name := cyclingNames(fmt.Sprintf("gap-%d", work.Microseconds()), 64)
			for i := range 500 { // cached, and past the first fence blocks
				lockCycle(b, cl, name(i))
			}
			var samples []time.Duration
			var switches int64
			var cpu time.Duration
			for range b.N {
				switchesBefore, cpuBefore := contextSwitches(b, pid), cpuTime(b, pid)
				for i, end := 0, time.Now().Add(3*time.Second); time.Now().Before(end); i++ {
					start := time.Now()
					lockCycle(b, cl, name(i))
					samples = append(samples, time.Since(start))
					spinFor(work)
				}
				switches += contextSwitches(b, pid) - switchesBefore
				cpu += cpuTime(b, pid) - cpuBefore
			}
			cycles := float64(len(samples))
			report(b, "", samples)
			b.ReportMetric(float64(switches)/cycles, "agent-switches/cycle")
			b.ReportMetric(float64(cpu.Microseconds())/cycles, "agent-cpu-µs/cycle")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// contextSwitches is the sum of every thread's voluntary and involuntary
// context switches of process pid.
func contextSwitches(b testing.TB, pid int) int64 {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	if err != nil || len(tasks) == 0 {
		b.Fatalf("threads of %d: %v", pid, err)
	}
	var total int64
	for _, task := range tasks {
		status, err := os.ReadFile(task)
		if err != nil {
			continue // a thread that ended meanwhile
		}
		for _, line := range strings.Split(string(status), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.HasSuffix(k, "voluntary_ctxt_switches") {
				n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				total += n
			}
		}
	}
	return total
}
