package tests

// BenchmarkCompare sets four ways to take a RedLock side by side, over the
// same three masters:
//
//   - floor: the least any RedLock client must do, written here
//     (compare_contenders_test.go);
//   - redsync: github.com/go-redsync/redsync/v4 over go-redis v9;
//   - agent: lock-agent as users run it: the real binary (built without
//     the race detector), two agents in processes of their own, the
//     clients in the benchmark's process, one request at a time. These
//     are the figures kept;
//   - agent-inproc: the same two agents inside the benchmark's process
//     (agenttest), for comparison: clients and agent share one Go runtime
//     there, and a socket wake-up between them is cheaper than between two
//     processes;
//   - agent-3x1shard, agent-3x3shards: the agent's two processes over
//     three Redis Clusters of 1 or 3 shards instead (compare_clusters_test.go),
//     in the scenarios where names spread or agents meet.
//
// Scenarios come hot and cold where it matters to an agent that keeps
// what it learned of a name: a name used again and again (serial-64: a
// service cycling through 64 job names; serial-64-work: the same with
// 200µs of work after each cycle), and a fresh name each cycle. Every scenario runs for a fixed window (or count), so the
// whole run takes about four minutes:
//
//	go test ./tests -run '^$' -bench '^BenchmarkCompare$' -benchtime 1x -timeout 20m
//
// Compare figures of one run only, as ratios to the floor: the load of the
// machine moves them all.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
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
	// compareMaxRefusals bounds how often one LOCK is tried again.
	compareMaxRefusals = 1000
	// compareLockTimeout bounds a LOCK that should be granted at once.
	compareLockTimeout = 10 * time.Second
)

// compareLock is the lock block of the agents: the floor's lease, and the
// polling range of the floor and redsync (pollMin, pollMax) for a split
// vote, as agenttest.Config sets them.
const compareLock = `  lease = "15s"
  retry_min = "5ms"
  retry_max = "50ms"
  key_prefix = "proc:"
`

func BenchmarkCompare(b *testing.B) {
	servers := redistest.Start(b, 3)
	all := []*contender{newFloor(b, servers), newRedsync(b, servers), newProcAgents(b, servers), newInprocAgents(b, servers)}
	masters := newCostMasters(b, servers)
	for _, c := range all {
		c.masters = masters
	}
	each := func(scenario string, bench func(*testing.B, *contender)) {
		b.Run(scenario, func(b *testing.B) { runEach(b, all, bench) })
	}
	// eachAndClusters runs the agent over Redis Cluster masters too, each
	// started for its scenario alone (compare_clusters_test.go).
	eachAndClusters := func(scenario string, bench func(*testing.B, *contender)) {
		b.Run(scenario, func(b *testing.B) {
			runEach(b, all, bench)
			runEachCluster(b, bench)
		})
	}
	b.Run("serial", func(b *testing.B) { benchSerial(b, slices.Concat(all, newClusterContenders(b)), oneName("serial"), 0) })
	b.Run("serial-fresh", func(b *testing.B) {
		benchSerial(b, slices.Concat(all, newClusterContenders(b)), freshNames("serial-fresh"), 0)
	})
	b.Run("serial-64", func(b *testing.B) { benchSerial(b, all, cyclingNames("serial-64", 64), 0) })
	b.Run("serial-64-work", func(b *testing.B) { benchSerial(b, all, cyclingNames("serial-64-work", 64), serialWork) })
	eachAndClusters("64-names", benchDistinct)
	eachAndClusters("64-fresh", benchDistinctFresh)
	each("16-one-name", benchOneName)
	eachAndClusters("16-two-agents", benchTwoAgents)
	eachAndClusters("ping-pong", benchPingPong)
	each("remote-try", benchRemoteTry)
	b.Run("wakeup", func(b *testing.B) {
		for _, c := range all {
			b.Run(c.name, func(b *testing.B) { benchWakeup(b, c, 0, 0) })
			if c.parked != nil {
				b.Run(c.name+"-across", func(b *testing.B) { benchWakeup(b, c, 0, 1) })
			}
		}
	})
	b.Run("memory", benchAgentMemory)
}

// runEach runs bench for each contender in all, one sub-benchmark each.
func runEach(b *testing.B, all []*contender, bench func(*testing.B, *contender)) {
	for _, c := range all {
		b.Run(c.name, func(b *testing.B) {
			bench(b, c)
			b.ReportMetric(0, "ns/op") // the window, not a figure
		})
	}
}

// newProcAgents runs two agent processes, a and b, over servers.
func newProcAgents(b *testing.B, servers []*redistest.Server) *contender {
	agents := startProcAgents(b, releaseBinary(b), servers, compareLock, "a", "b")
	return newAgentContender("agent", [2]string{agents[0].sock, agents[1].sock})
}

// newInprocAgents runs two agents, a and b, in the benchmark's process,
// configured as newProcAgents's but for their keys' prefix: the two pairs
// must not meet on a name.
func newInprocAgents(b *testing.B, servers []*redistest.Server) *contender {
	var socks [2]string
	for i, id := range []string{"a", "b"} {
		cfg := agenttest.Config(b, servers, floorLease)
		cfg.AgentID = id
		cfg.Lock.KeyPrefix = "inproc:"
		agenttest.Bootstrap(b, cfg)
		socks[i] = agenttest.Start(b, cfg).Config.Socket.Path
	}
	return newAgentContender("agent-inproc", socks)
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

// serialWork is the work between cycles of serial-64-work: a service that
// does something with each lock, as the "reuse with work" case.
const serialWork = 200 * time.Microsecond

// spinFor keeps the CPU busy for d, as work between cycles does (a sleep
// would leave the core to others and wake up late).
func spinFor(d time.Duration) {
	for start := time.Now(); time.Since(start) < d; {
	}
}

// serialBlock is how many LOCK+UNLOCK cycles one contender runs in turn
// in the serial scenario before the next one takes over.
const serialBlock = 100

// namer names the name a client locks in its cycle-th cycle.
type namer func(cycle int) string

// oneName is the hot case: the same name every cycle.
func oneName(name string) namer { return func(int) string { return name } }

// cyclingNames is a service cycling through its n job names: each name is
// used again every n cycles.
func cyclingNames(prefix string, n int) namer {
	return func(cycle int) string { return fmt.Sprintf("%s/%d", prefix, cycle%n) }
}

// freshNames is the cold case: a name never used before every cycle.
func freshNames(prefix string) namer {
	return func(cycle int) string { return fmt.Sprintf("%s/%d", prefix, cycle) }
}

// benchSerial: one client of each contender locking and unlocking a free
// name, the names given by name: LOCK+UNLOCK latency, with work (a CPU
// spin of that long, not timed) after each UNLOCK: a client that does
// something between its cycles leaves the agent idle meanwhile. The contenders take
// turns in short blocks over one window as many times as long as there
// are contenders, not one window each: a slow spell of the host then falls
// on all of them alike, and their ratio holds from run to run.
func benchSerial(b *testing.B, all []*contender, name namer, work time.Duration) {
	clients := make([]locker, len(all))
	cycles := make([]int, len(all))
	for i, c := range all {
		clients[i] = c.client(b, 0)
		for range 20 {
			lockCycle(b, clients[i], name(cycles[i]))
			cycles[i]++
		}
	}
	samples := make([][]time.Duration, len(all))
	refused := make([]int, len(all))
	spent := make([]masterLoad, len(all)) // what each one's blocks cost the masters
	for range b.N {
		end := time.Now().Add(time.Duration(len(all)) * compareWindow)
		for turn := 0; turn < compareMaxCycles/serialBlock && time.Now().Before(end); turn++ {
			i := turn % len(all)
			before := readMasterLoad(b, all[i].masters)
			for range serialBlock {
				start := time.Now()
				refused[i] += lockCycle(b, clients[i], name(cycles[i]))
				samples[i] = append(samples[i], time.Since(start))
				cycles[i]++
				spinFor(work)
			}
			spent[i] = spent[i].add(readMasterLoad(b, all[i].masters).since(before, all[i].masters))
		}
	}
	for i, c := range all {
		b.Run(c.name, func(b *testing.B) {
			report(b, "", samples[i])
			b.ReportMetric(float64(refused[i]), "refused")
			if c.masters != nil {
				spent[i].report(b, len(samples[i]))
			}
			b.ReportMetric(0, "ns/op") // the window, not a figure
		})
	}
}

// masterLoad is what the masters ran, as their own INFO says: Redis calls
// (INFO commandstats, where a script's call and every command it runs each
// count: a RedLock's script costs its calls inside; INFO stats'
// total_commands_processed counts them too), CPU (INFO cpu, used_cpu_sys +
// used_cpu_user: the server's threads, its networking in the kernel
// included), and reads (INFO stats' total_reads_processed: each a wake-up
// of the server to read what a client sent, a request or a pipeline of
// them), all the masters summed. The benchmark's own commands are left out
// of the calls (see readCost) and its INFOs out of the reads, and the time
// of every INFO out of the CPU: the agents' probes send INFO too, but on a
// timer, not per cycle.
type masterLoad struct {
	calls, reads int64
	cpu          time.Duration
}

// masterLoadInfos is how many INFOs readMasterLoad sends each master.
const masterLoadInfos = 3

// readMasterLoad reads ms; the zero masterLoad for none.
func readMasterLoad(b *testing.B, ms costMasters) masterLoad {
	if ms == nil {
		return masterLoad{}
	}
	r := readCost(b, ms, nil)
	load := masterLoad{calls: r.redisCalls(), cpu: -time.Duration(r.calls["info"].usec) * time.Microsecond}
	for _, m := range ms {
		f := m.info(b, "cpu")
		for _, field := range []string{"used_cpu_sys", "used_cpu_user"} {
			s, err := strconv.ParseFloat(f[field], 64)
			if err != nil {
				b.Fatalf("INFO cpu %s: %v", field, err)
			}
			load.cpu += time.Duration(s * float64(time.Second))
		}
		reads, err := strconv.ParseInt(m.info(b, "stats")["total_reads_processed"], 10, 64)
		if err != nil {
			b.Fatalf("INFO stats total_reads_processed: %v", err)
		}
		load.reads += reads
	}
	return load
}

// since is what ran from before to l, the INFOs that read it left out of
// its reads.
func (l masterLoad) since(before masterLoad, ms costMasters) masterLoad {
	own := int64(masterLoadInfos * len(ms))
	return masterLoad{calls: l.calls - before.calls, reads: l.reads - before.reads - own, cpu: l.cpu - before.cpu}
}

func (l masterLoad) add(more masterLoad) masterLoad {
	return masterLoad{calls: l.calls + more.calls, reads: l.reads + more.reads, cpu: l.cpu + more.cpu}
}

// report reports l over cycles LOCK+UNLOCK cycles.
func (l masterLoad) report(b *testing.B, cycles int) {
	if cycles == 0 {
		return
	}
	b.ReportMetric(float64(l.calls)/float64(cycles), "redis-calls/cycle")
	b.ReportMetric(float64(l.reads)/float64(cycles), "reads/cycle")
	b.ReportMetric(float64(l.cpu.Microseconds())/float64(cycles), "masters-cpu-µs/cycle")
}
