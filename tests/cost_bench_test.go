package tests

// BenchmarkCost: what lock-agent costs its masters and its hosts as the
// agents and the names grow (issue 20, item 4), read from outside as an
// operator reads it:
//
//   - agents=N (N = 1, 4, 16, 64): N agent processes (the release binary,
//     default lock settings: a 15 s lease, lock caching for 1 s) over
//     three fresh masters, and 64 clients in the benchmark's process spread
//     over them (client i on agent i mod N), each locking and unlocking for
//     costWindow: hot (each client its own name, again and again), shared
//     (all 64 on 16 names, the 4 clients of a name on 4 different agents
//     once N >= 4), cold (a fresh name each cycle), twice (a fresh name
//     every two cycles: each is cached, and its cache ends). And idle: the
//     agents running with no client.
//   - names: one agent, three fresh masters, costNames fresh names locked
//     and held, then released: the masters' memory per name held, just
//     released, and once the release tombstones expired (what a name leaves
//     behind for good).
//   - clusters-3xS/agents=N (S = 1, 3; N = 1, 4): agents=N over three
//     masters that are each a Redis Cluster of S shards, every node read
//     as a master is (cost_clusters_test.go); and bus: what a PUBLISH
//     alone costs such a cluster's nodes, the one that runs it and those
//     that receive it over the cluster bus.
//
// CPU is utime+stime of each process from /proc/PID/stat, before and after
// (the masters' pids from INFO server); counts come from the masters' INFO
// commandstats, which counts a command run by a script too (PUBLISH from
// the release script is in cmdstat_publish: see
// TestCostReadingsSeeScripts). The run takes about four minutes:
//
//	go test -count=1 -run '^$' -bench '^BenchmarkCost$' -benchtime 1x -timeout 20m ./tests

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/redistest"
)

const (
	// costWindow is how long each client pattern runs.
	costWindow = 4 * time.Second
	// costIdleWindow is how long the idle agents are read over.
	costIdleWindow = 3 * time.Second
	// costClients is the client load, spread over the agents.
	costClients = 64
	// costSharedNames is how many names the shared pattern's clients share.
	costSharedNames = 16
	// costSampleEvery is how often the subscriptions are counted while
	// clients run.
	costSampleEvery = 250 * time.Millisecond
	// costQuietTimeout bounds the wait for the agents' caches to end.
	costQuietTimeout = 30 * time.Second

	// costNames fresh names are locked by costSessions sessions, costBatch
	// LOCKs at a time each, in the names scenario.
	costNames    = 30_000
	costSessions = 30
	costBatch    = 100
	// costExpireTimeout bounds the wait for the release tombstones (15 s)
	// to expire.
	costExpireTimeout = 60 * time.Second
)

// costLock is the lock block of the agents: the defaults, under a key
// prefix of the benchmark's own (see costRecords, channelsOf).
const costLock = "  key_prefix = \"cost:\"\n"

var costAgentCounts = []int{1, 4, 16, 64}

func BenchmarkCost(b *testing.B) {
	for _, n := range costAgentCounts {
		b.Run(fmt.Sprintf("agents=%d", n), func(b *testing.B) { benchCostAgents(b, n) })
	}
	b.Run("names", benchCostNames)
	for _, shards := range clusterShardCounts {
		b.Run(fmt.Sprintf("clusters-3x%d", shards), func(b *testing.B) {
			for _, n := range costClusterAgentCounts {
				b.Run(fmt.Sprintf("agents=%d", n), func(b *testing.B) { benchCostClusters(b, shards, n) })
			}
			b.Run("bus", func(b *testing.B) { benchCostBus(b, shards) })
		})
	}
}

// costPattern is one way the 64 clients pick names.
type costPattern struct {
	name   string
	fresh  bool // a fresh name under nameOf each cycle
	reuse  int  // with fresh: each name for this many cycles in a row
	nameOf func(client int) string
}

var costPatterns = []costPattern{
	{name: "hot", nameOf: func(i int) string { return "hot/" + strconv.Itoa(i) }},
	// Clients 4k … 4k+3 share name k: on agents 4k … 4k+3 mod N, four
	// different agents once there are four or more.
	{name: "shared", nameOf: func(i int) string {
		return "shared/" + strconv.Itoa(i/(costClients/costSharedNames))
	}},
	{name: "cold", fresh: true, nameOf: func(i int) string { return "cold/" + strconv.Itoa(i) }},
	// A name in use again (its second LOCK comes right after its first
	// release) is cached, and its cache ends a linger after the second.
	{name: "twice", fresh: true, reuse: 2, nameOf: func(i int) string { return "twice/" + strconv.Itoa(i) }},
}

// reusedNames is a client whose fresh names (runWorkers's name/N, N the
// cycle) each serve r.every cycles in a row: name/(N/every).
type reusedNames struct {
	locker
	every int
}

func (r reusedNames) lock(ctx context.Context, name string) (bool, error) {
	return r.locker.lock(ctx, r.rename(name))
}

func (r reusedNames) try(name string) (bool, error) { return r.locker.try(r.rename(name)) }

func (r reusedNames) unlock(name string) error { return r.locker.unlock(r.rename(name)) }

func (r reusedNames) rename(name string) string {
	i := strings.LastIndexByte(name, '/')
	cycle, err := strconv.Atoi(name[i+1:])
	if err != nil {
		panic(fmt.Sprintf("reusedNames: %q is not a fresh name", name))
	}
	return name[:i+1] + strconv.Itoa(cycle/r.every)
}

// benchCostAgents runs n agent processes over three fresh masters, reads
// them idle, then under each client pattern.
func benchCostAgents(b *testing.B, n int) {
	servers := redistest.Start(b, 3)
	benchCostAgentsOver(b, standaloneMasters(servers), newCostMasters(b, servers), n)
}

// benchCostAgentsOver runs n agent processes over masters, which masters
// reads, as benchCostAgents does.
func benchCostAgentsOver(b *testing.B, over procMasters, masters costMasters, n int) {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "cost" + strconv.Itoa(i)
	}
	agents := startProcAgentsOver(b, releaseBinary(b), over, costLock, ids...)
	b.Cleanup(func() { stopAtOnce(agents) })
	masters.awaitSettled(b, n)
	idle := measureIdle(b, masters, agents)
	b.Run("idle", idle.report)
	clients := make([]locker, costClients)
	for i := range clients {
		clients[i] = dialLine(b, agents[i%n].sock)
	}
	for _, p := range costPatterns {
		b.Run(p.name, func(b *testing.B) { benchCostPattern(b, p, clients, masters, agents, idle) })
	}
}

// stopAtOnce sends every agent SIGTERM, then waits for each to exit (for
// up to 10 s in all), so that 64 agents stop in the time of one. Registered
// after the agents' own stops, it runs before them: those then only read
// each agent's exit (a second SIGTERM would make it exit at once, and 1).
func stopAtOnce(agents []*procAgent) {
	for _, a := range agents {
		a.cmd.Process.Signal(syscall.SIGTERM)
	}
	timeout := time.After(10 * time.Second)
	for _, a := range agents {
		select {
		case <-a.done:
		case <-timeout:
			return
		}
	}
}

// costIdle is what the agents cost by being there, with no client:
// health probes, subscriptions, timers.
type costIdle struct {
	masters, agents float64 // CPU seconds per second
	callsPerSecond  float64 // commands the masters ran
	connsPerMaster  float64
	rssPerAgent     float64 // bytes
}

// measureIdle reads the agents with no client for costIdleWindow. The
// sleep is the measurement's window, not a wait for an event.
func measureIdle(b *testing.B, masters costMasters, agents []*procAgent) costIdle {
	before := readCost(b, masters, agents)
	time.Sleep(costIdleWindow)
	after := readCost(b, masters, agents)
	took := after.at.Sub(before.at).Seconds()
	var rss int64
	for _, a := range agents {
		rss += rssBytes(b, a.pid())
	}
	return costIdle{
		masters:        (after.masters - before.masters).Seconds() / took,
		agents:         (after.agents - before.agents).Seconds() / took,
		callsPerSecond: float64(after.redisCalls()-before.redisCalls()) / took,
		connsPerMaster: masters.meanInfo(b, "clients", "connected_clients"),
		rssPerAgent:    float64(rss) / float64(len(agents)),
	}
}

func (c costIdle) report(b *testing.B) {
	b.ReportMetric(100*c.masters, "masters-cpu-%")
	b.ReportMetric(100*c.agents, "agents-cpu-%")
	b.ReportMetric(c.callsPerSecond, "redis-calls/s")
	b.ReportMetric(c.connsPerMaster, "conns/master")
	b.ReportMetric(c.rssPerAgent/(1<<20), "agent-RSS-MiB")
	b.ReportMetric(0, "ns/op")
}

// benchCostPattern runs the clients for costWindow with names picked by
// p, and reports what a LOCK+UNLOCK cycle cost, as read and net of what
// the agents cost idle over as long (see perCycle). It reads the counters once
// every name is released, so that a cycle's cost includes its cache's
// release after the window; and it counts the name channels still
// subscribed then, which no agent watches any more.
func benchCostPattern(b *testing.B, p costPattern, clients []locker, masters costMasters, agents []*procAgent, idle costIdle) {
	if p.reuse > 0 {
		reused := make([]locker, len(clients))
		for i, c := range clients {
			reused[i] = reusedNames{c, p.reuse}
		}
		clients = reused
	}
	for round := range b.N {
		stem := p.name + "/"
		names := make([]string, len(clients))
		for i := range names {
			names[i] = p.nameOf(i) + "/" + strconv.Itoa(round)
		}
		masters.awaitReleased(b)
		before := readCost(b, masters, agents)
		sampling := masters.sampleSubscriptions(channelsOf(stem))
		w := runWorkers(b, clients, names, p.fresh, costWindow)
		subs := sampling.stop(b)
		masters.awaitReleased(b)
		after := readCost(b, masters, agents)
		w.report(b)
		cycles := 0
		for _, g := range w.grants {
			cycles += g
		}
		if cycles == 0 {
			b.Fatal("no cycle in the window")
		}
		after.perCycle(b, before, float64(cycles), idle)
		b.ReportMetric(subs.perChannel(), "subs/channel")
		b.ReportMetric(subs.channels(), "channels")
		b.ReportMetric(masters.meanChannels(b, channelsOf(stem)), "left-channels")
	}
	b.ReportMetric(0, "ns/op")
}

// benchCostNames: one agent over three fresh masters; costNames fresh
// names locked and held, then released. It reports a master's memory per
// name (the mean over the masters, above theirs before) while held, just
// released (the release tombstones still there), and once the tombstones
// expired: what a name leaves for good, which is its fence counter (it
// never expires). Memory is used_memory, what an operator watches, and
// used_memory_dataset, the keys alone (without the buffers of the
// connections and the tables' own overhead, which a burst moves); and
// MEMORY USAGE of one name's keys.
func benchCostNames(b *testing.B) {
	for range b.N {
		servers := redistest.Start(b, 3)
		a := startProcAgents(b, releaseBinary(b), servers, costLock, "names")[0]
		masters := newCostMasters(b, servers)
		conns := dialRaw(b, a.sock, costSessions)
		base := masters.memory(b)
		took := costPipeline(b, conns, "LOCK", " wait=10s")
		held := masters.memory(b)
		keys := masters[0].nameKeys(b, "names/0/0")
		costPipeline(b, conns, "UNLOCK", "")
		masters.awaitReleased(b)
		released := masters.memory(b)
		keys.tombstone = masters[0].memoryUsage(b, "cost:{names/0/0}:released:"+keys.holder)
		masters.awaitExpired(b, base.expires)
		left := masters.memory(b)
		b.ReportMetric(costNames/took.Seconds(), "locks/s")
		for _, m := range []struct {
			state string
			mem   costMemory
		}{{"held", held}, {"released", released}, {"left", left}} {
			b.ReportMetric((m.mem.used-base.used)/costNames, m.state+"-B/name")
			b.ReportMetric((m.mem.dataset-base.dataset)/costNames, m.state+"-dataset-B/name")
			b.ReportMetric((m.mem.keys-base.keys)/costNames, m.state+"-keys/name")
		}
		b.ReportMetric(keys.set, "set-key-B")
		b.ReportMetric(keys.record, "record-key-B")
		b.ReportMetric(masters[0].memoryUsage(b, "cost:{names/0/0}:fence"), "fence-key-B")
		b.ReportMetric(keys.tombstone, "tombstone-key-B")
	}
	b.ReportMetric(0, "ns/op")
}

// dialRaw opens n sessions to the agent at sock, closed when b ends.
func dialRaw(b *testing.B, sock string, n int) []*rawConn {
	conns := make([]*rawConn, n)
	for i := range conns {
		nc, err := net.Dial("unix", sock)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { nc.Close() })
		conns[i] = &rawConn{nc, bufio.NewReader(nc)}
	}
	return conns
}

// costPipeline sends "VERB names/S/I" + args for each of its names on
// each session S, costBatch at a time, the sessions at once, and fails
// unless every reply is OK.
func costPipeline(b *testing.B, conns []*rawConn, verb, args string) time.Duration {
	start := time.Now()
	var wg sync.WaitGroup
	for s, c := range conns {
		wg.Go(func() {
			per := costNames / len(conns)
			for i := 0; i < per; i += costBatch {
				var lines strings.Builder
				for j := i; j < min(i+costBatch, per); j++ {
					fmt.Fprintf(&lines, "t%d %s names/%d/%d%s\n", j, verb, s, j, args)
				}
				c.roundTrip(b, lines.String(), min(costBatch, per-i))
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	return time.Since(start)
}
