package quorum

import (
	"context"
	"fmt"
	"strconv"
	"strings"
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

// BenchmarkScriptCost reports what one master spends running the hot
// scripts of a serial LOCK+UNLOCK of one name (a new holder each time, as the
// agent makes): the acquire and release scripts, beside what a minimal
// RedLock client's SET NX PX and compare-and-delete cost the same master.
// The figures are the master's own (INFO commandstats), so the load of the
// benchmark's process does not move them, but the host's does: compare
// within one run.
//
//	go test ./quorum -run '^$' -bench BenchmarkScriptCost -benchtime 20000x
func BenchmarkScriptCost(b *testing.B) {
	servers := redistest.Start(b, 1)
	c := newCluster(b, servers, time.Second)
	ctx := context.Background()
	m := c.masters[0]
	cl := m.getClient()
	// usec is the master's total µs in EVALSHA and in SET so far.
	usec := func() (eval, set float64) {
		info, err := cl.Do(ctx, cl.B().Info().Section("commandstats").Build()).ToString()
		if err != nil {
			b.Fatal(err)
		}
		for _, line := range strings.Split(info, "\n") {
			name, stats, _ := strings.Cut(strings.TrimSpace(line), ":")
			for _, kv := range strings.Split(stats, ",") {
				if v, ok := strings.CutPrefix(kv, "usec="); ok {
					f, _ := strconv.ParseFloat(v, 64)
					switch name {
					case "cmdstat_evalsha":
						eval = f
					case "cmdstat_set":
						set = f
					}
				}
			}
		}
		return eval, set
	}
	cad := rueidis.NewLuaScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)
	var acquire, release, setNX, compareDelete float64
	b.ResetTimer()
	for i := range b.N {
		holder := "h" + strconv.Itoa(i)
		req := AcquireRequest{Name: "serial", Holder: holder, Lease: 15 * time.Second, Who: Who{Agent: "a", PID: 4242, UID: 1000, SinceMilli: time.Now().UnixMilli()}}
		keys, args := c.acquireArgs(req)
		e0, _ := usec()
		if r, err := m.eval(ctx, acquireScript, keys, args).AsIntSlice(); err != nil || r[0] != 1 {
			b.Fatalf("acquire: %v %v", r, err)
		}
		e1, _ := usec()
		keys, args = c.releaseArgs(req.Name, holder, req.Name)
		if err := m.eval(ctx, releaseScript, keys, args).Error(); err != nil {
			b.Fatal(err)
		}
		e2, s2 := usec()
		if err := cl.Do(ctx, cl.B().Set().Key("floor").Value(holder).Nx().PxMilliseconds(15000).Build()).Error(); err != nil {
			b.Fatal(err)
		}
		e3, s3 := usec()
		if err := cad.Exec(ctx, cl, []string{"floor"}, []string{holder}).Error(); err != nil {
			b.Fatal(err)
		}
		e4, _ := usec()
		acquire, release, setNX, compareDelete = acquire+e1-e0, release+e2-e1, setNX+s3-s2, compareDelete+e4-e3
	}
	n := float64(b.N)
	b.ReportMetric(acquire/n, "acquire-µs")
	b.ReportMetric(release/n, "release-µs")
	b.ReportMetric(setNX/n, "setnx-µs")
	b.ReportMetric(compareDelete/n, "cad-µs")
	b.ReportMetric(0, "ns/op")
}
