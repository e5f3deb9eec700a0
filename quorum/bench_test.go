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
	"github.com/lock-agent/lock-agent/quorum/scripts"
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
				cmds = append(cmds, cl.B().Set().Key(c.keys.Holder(k.Name, k.Holder)).Value("x").Px(time.Minute).Build(),
					cl.B().Sadd().Key(c.keys.Set(k.Name)).Member(k.Holder).Build())
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
// RedLock client's SET NX PX and compare-and-delete cost the same master;
// and the acquire of a fresh name each time, by the general script
// (fresh-acquire-µs) and by the lean one a plain lock runs
// (fresh-lean-µs: see AcquireRequest.lean).
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
		st := commandUsec(ctx, b, cl)
		return st["evalsha"], st["set"]
	}
	cad := rueidis.NewLuaScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)
	var acquire, release, setNX, compareDelete, freshAcquire, freshLean float64
	b.ResetTimer()
	for i := range b.N {
		holder := "h" + strconv.Itoa(i)
		req := AcquireRequest{Name: "serial", Holder: holder, Lease: 15 * time.Second, Who: Who{Agent: "a", PID: 4242, UID: 1000, SinceMilli: time.Now().UnixMilli()}}
		keys, args := c.acquireArgs(req)
		e0, _ := usec()
		if r, err := m.eval(ctx, scripts.Acquire, keys, args).AsIntSlice(); err != nil || r[0] != 1 {
			b.Fatalf("acquire: %v %v", r, err)
		}
		e1, _ := usec()
		keys, args = c.releaseArgs(req.Name, holder, req.Name)
		if err := m.eval(ctx, scripts.Release, keys, args).Error(); err != nil {
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
		for _, lean := range []bool{false, true} {
			req.Name = "fresh/" + strconv.Itoa(i)
			s, keys, args := scripts.Acquire, []string(nil), []string(nil)
			if lean {
				req.Name = "lean/" + strconv.Itoa(i)
				s, keys, args = c.acquireCall(req)
			} else {
				keys, args = c.acquireArgs(req)
			}
			e0, _ := usec()
			if r, err := m.eval(ctx, s, keys, args).AsIntSlice(); err != nil || r[0] != 1 {
				b.Fatalf("acquire: %v %v", r, err)
			}
			e1, _ := usec()
			if lean {
				freshLean += e1 - e0
			} else {
				freshAcquire += e1 - e0
			}
		}
	}
	n := float64(b.N)
	b.ReportMetric(acquire/n, "acquire-µs")
	b.ReportMetric(freshAcquire/n, "fresh-acquire-µs")
	b.ReportMetric(freshLean/n, "fresh-lean-µs")
	b.ReportMetric(release/n, "release-µs")
	b.ReportMetric(setNX/n, "setnx-µs")
	b.ReportMetric(compareDelete/n, "cad-µs")
	b.ReportMetric(0, "ns/op")
}

// commandUsec is the total µs the server c spent in each command so far
// (INFO commandstats), by command: "evalsha", "set", "info".
func commandUsec(ctx context.Context, b *testing.B, c rueidis.Client) map[string]float64 {
	info, err := c.Do(ctx, c.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(info, "\n") {
		name, stats, _ := strings.Cut(strings.TrimSpace(line), ":")
		for _, kv := range strings.Split(stats, ",") {
			if v, ok := strings.CutPrefix(kv, "usec="); ok {
				out[strings.TrimPrefix(name, "cmdstat_")], _ = strconv.ParseFloat(v, 64)
			}
		}
	}
	return out
}

// BenchmarkScriptCostCluster is BenchmarkScriptCost on a master that is a
// Redis Cluster of one shard: the acquire and release of a serial
// LOCK+UNLOCK as the agent runs them there, whose gate reads the server's
// run_id (INFO server) on every call (see shards.go); the INFO within
// (info-µs); and the same acquire on the same node run with the gate a
// standalone master runs, which only compares the run_id the agent
// verified (acquire-no-info-µs): the difference is what the per-call
// run_id read costs. The same again as the node's CPU per acquire+release
// round over a block of b.N rounds each way (round-cpu-µs,
// round-no-info-cpu-µs), which the host's load does not stretch. The
// probe runs once a minute, so that its own INFO and scripts do not fall
// between the readings.
//
//	go test ./quorum -run '^$' -bench BenchmarkScriptCostCluster -benchtime 20000x
func BenchmarkScriptCostCluster(b *testing.B) {
	cfg := clusterConfig(b, startClusters(b, 1, 1), time.Second, true)
	cfg.ProbeInterval = time.Minute
	c := startCluster(b, cfg)
	ctx := context.Background()
	m := c.masters[0]
	cl := m.getClient()
	var acquire, info, noInfo, release float64
	b.ResetTimer()
	for i := range b.N {
		req := AcquireRequest{Name: "serial", Holder: "h" + strconv.Itoa(i), Lease: 15 * time.Second, Who: Who{Agent: "a", PID: 4242, UID: 1000, SinceMilli: time.Now().UnixMilli()}}
		keys, args := c.acquireArgs(req)
		s0 := commandUsec(ctx, b, cl)
		benchAcquire(b, m.eval(ctx, scripts.Acquire, keys, args))
		s1 := commandUsec(ctx, b, cl)
		benchRelease(ctx, b, c, req)
		s2 := commandUsec(ctx, b, cl)
		req.Holder += "-no-info"
		benchAcquire(b, evalNoInfo(ctx, c, m, req))
		s3 := commandUsec(ctx, b, cl)
		benchRelease(ctx, b, c, req)
		acquire += s1["evalsha"] + s1["eval"] - s0["evalsha"] - s0["eval"]
		// Each window also holds the INFO commandstats that opened it:
		// the next window's, which ran no INFO else, says what that cost.
		info += (s1["info"] - s0["info"]) - (s2["info"] - s1["info"])
		release += s2["evalsha"] + s2["eval"] - s1["evalsha"] - s1["eval"]
		noInfo += s3["evalsha"] + s3["eval"] - s2["evalsha"] - s2["eval"]
	}
	n := float64(b.N)
	b.ReportMetric(acquire/n, "acquire-µs")
	b.ReportMetric(info/n, "info-µs")
	b.ReportMetric(noInfo/n, "acquire-no-info-µs")
	b.ReportMetric(release/n, "release-µs")
	// commandstats' usec is wall time, which a loaded host stretches when
	// it preempts the node mid-script; the node's CPU over a block of
	// rounds is not.
	round := func(i int, acquire func(AcquireRequest) rueidis.RedisResult) {
		req := AcquireRequest{Name: "serial", Holder: "c" + strconv.Itoa(i), Lease: 15 * time.Second, Who: Who{Agent: "a", PID: 4242, UID: 1000, SinceMilli: time.Now().UnixMilli()}}
		benchAcquire(b, acquire(req))
		benchRelease(ctx, b, c, req)
	}
	withInfo := nodeCPU(ctx, b, cl, func() {
		for i := range b.N {
			round(i, func(req AcquireRequest) rueidis.RedisResult {
				keys, args := c.acquireArgs(req)
				return m.eval(ctx, scripts.Acquire, keys, args)
			})
		}
	})
	withoutInfo := nodeCPU(ctx, b, cl, func() {
		for i := range b.N {
			round(b.N+i, func(req AcquireRequest) rueidis.RedisResult { return evalNoInfo(ctx, c, m, req) })
		}
	})
	b.ReportMetric(withInfo/n, "round-cpu-µs")
	b.ReportMetric(withoutInfo/n, "round-no-info-cpu-µs")
	b.ReportMetric(0, "ns/op")
}

// nodeCPU is the CPU the server c used while do ran, in µs: INFO cpu's
// used_cpu_user and used_cpu_sys (getrusage), before and after.
func nodeCPU(ctx context.Context, b *testing.B, c rueidis.Client, do func()) float64 {
	read := func() float64 {
		info, err := c.Do(ctx, c.B().Info().Section("cpu").Build()).ToString()
		if err != nil {
			b.Fatal(err)
		}
		var sum float64
		for _, line := range strings.Split(info, "\n") {
			k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
			if k == "used_cpu_user" || k == "used_cpu_sys" {
				f, _ := strconv.ParseFloat(v, 64)
				sum += f * 1e6
			}
		}
		return sum
	}
	before := read()
	do()
	return read() - before
}

// evalNoInfo runs req's acquire on m, a cluster master, as evalOn would
// but with the gate that does not read INFO (scripts.Acquire itself, not
// its fallback), by EVALSHA, or EVAL when the node does not know it.
func evalNoInfo(ctx context.Context, c *Cluster, m *master, req AcquireRequest) rueidis.RedisResult {
	keys, args := c.acquireArgs(req)
	_, keys = c.keys.CallSlot(keys)
	args = m.gateArgs(scripts.Acquire, args)
	cl := m.getClient()
	r := cl.Do(ctx, cl.B().Evalsha().Sha1(scripts.Acquire.SHA).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build())
	if noScript(r.Error()) {
		r = cl.Do(ctx, cl.B().Eval().Script(scripts.Acquire.Src).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build())
	}
	return r
}

// benchAcquire fails b unless r grants.
func benchAcquire(b *testing.B, r rueidis.RedisResult) {
	if v, err := r.AsIntSlice(); err != nil || v[0] != 1 {
		b.Fatalf("acquire: %v %v", v, err)
	}
}

// benchRelease releases req's name on the master.
func benchRelease(ctx context.Context, b *testing.B, c *Cluster, req AcquireRequest) {
	keys, args := c.releaseArgs(req.Name, req.Holder, req.Name)
	if err := c.masters[0].eval(ctx, scripts.Release, keys, args).Error(); err != nil {
		b.Fatal(err)
	}
}
