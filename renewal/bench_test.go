package renewal

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/quorum"
	"github.com/lock-agent/lock-agent/quorum/clock"
	"github.com/lock-agent/lock-agent/quorum/rules"
)

// okRenewer renews every hold on every master, at once.
type okRenewer struct{}

func (okRenewer) Renew(_ context.Context, _ time.Duration, keys []quorum.RenewKey) []quorum.RenewResult {
	out := make([]quorum.RenewResult, len(keys))
	for i := range out {
		out[i] = quorum.RenewResult{OK: 3}
	}
	return out
}

// BenchmarkWatchdogTick100k is the watchdog's own work in one renewal tick
// of 100,000 holds, with masters that cost nothing: listing the holds to
// renew, their keys, and applying the answers to their deadlines and
// expiries. It reports that as a share of one core at the default 15s
// lease (a tick every 5s). The masters' side is quorum's
// BenchmarkRenew100k; the whole agent's, tests' BenchmarkRenewIdle100kHolds.
//
//	go test ./renewal -run '^$' -bench BenchmarkWatchdogTick100k -benchmem
func BenchmarkWatchdogTick100k(b *testing.B) {
	const holds = 100_000
	fake := clock.NewFake(time.Unix(1000, 0))
	w := New(Config{Lease: 15 * time.Second, DriftFactor: 0.01, Masters: 3, Renewer: okRenewer{}, Clock: fake,
		OnLost: func(*Hold, Loss) {}})
	for i := range holds {
		w.Add(&Hold{Name: fmt.Sprintf("mem/%d/%d", i/1000, i%1000), Holder: fmt.Sprintf("h%d", i)},
			fake.Now().Add(rules.Validity(15*time.Second, 0, 0.01)))
	}
	ctx := context.Background()
	tick := func() {
		done := make(chan round, 1)
		go w.renew(ctx, done)
		for r := range done {
			w.apply(r)
			if r.last {
				return
			}
		}
	}
	tick() // the first renewal prepares what later ones reuse
	b.ResetTimer()
	cpu0 := cpuTime()
	for range b.N {
		fake.Advance(w.Interval())
		tick()
	}
	cpu := (cpuTime() - cpu0) / time.Duration(b.N)
	b.ReportMetric(float64(cpu.Microseconds())/1000, "cpu-ms/tick")
	b.ReportMetric(float64(cpu)/float64(5*time.Second)*100, "%core@15s-lease")
}

// cpuTime is this process's user and system CPU time so far: on a host
// shared with other work, wall time says more of the others than of this.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
