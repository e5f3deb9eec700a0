package quorum

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/redistest"
	"github.com/redis/rueidis"
)

// cpuTime is this process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRenew100k renews 100,000 watchdog holds, as one watchdog tick
// does, and reports the agent-side CPU one round costs and what share of
// one core that is at the default lease (15s, renewed every 5s).
func BenchmarkRenew100k(b *testing.B) {
	const holds = 100_000
	servers := redistest.Start(b, 3)
	c := newCluster(b, servers, time.Second)
	keys := make([]RenewKey, holds)
	for i := range keys {
		keys[i] = RenewKey{Name: fmt.Sprintf("n%d", i), Holder: "h", Record: Record{Fence: 1}}
	}
	ctx := context.Background()
	for _, m := range c.masters { // plant the holds directly: acquiring 100k takes long
		cl := m.getClient()
		for lo := 0; lo < holds; lo += 10_000 {
			var cmds rueidis.Commands
			for _, k := range keys[lo : lo+10_000] {
				cmds = append(cmds, cl.B().Set().Key(c.holderKey(k.Name, k.Holder)).Value("x").Px(time.Minute).Build(),
					cl.B().Sadd().Key(c.setKey(k.Name)).Member(k.Holder).Build())
			}
			for _, r := range cl.DoMulti(ctx, cmds...) {
				if err := r.Error(); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	c.cfg.MasterTimeout = 10 * time.Second // one round of 100k: its deadline is not what is measured
	b.ResetTimer()
	var cpu, wall time.Duration
	for range b.N {
		cpu0, start := cpuTime(), time.Now()
		res := c.Renew(ctx, 15*time.Second, keys)
		wall += time.Since(start)
		cpu += cpuTime() - cpu0
		if res[0].OK != 3 || res[holds-1].OK != 3 {
			b.Fatalf("renew %+v %+v", res[0], res[holds-1])
		}
	}
	b.ReportMetric(float64(wall.Milliseconds())/float64(b.N), "wall-ms/round")
	b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/round")
	b.ReportMetric(float64(cpu)/float64(b.N)/float64(5*time.Second)*100, "%core@15s-lease")
}
