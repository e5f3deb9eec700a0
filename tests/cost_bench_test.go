package tests

// BenchmarkCost: what lock-agent costs its masters and its hosts as the
// agents and the names grow (issue 20, item 4), read from outside as an
// operator reads it:
//
//   - agents=N (N = 1, 4, 16, 64): N agent processes (the release binary,
//     default lock settings: a 15 s lease, lock caching for 1 s) over
//     three fresh masters, and 64 clients in the benchmark's process spread
//     over them (client i on agent i mod N), each locking and unlocking for
//     costWindow: hot (each client its own name, again and again), cold (a
//     fresh name each cycle), shared (all 64 on 16 names, the 4 clients of
//     a name on 4 different agents once N >= 4). And idle: the agents
//     running with no client.
//   - names: one agent, three fresh masters, costNames fresh names locked
//     and held, then released: the masters' memory per name held, just
//     released, and once the release tombstones expired (what a name leaves
//     behind for good).
//
// CPU is utime+stime of each process from /proc/PID/stat, before and after
// (the masters' pids from INFO server); counts come from the masters' INFO
// commandstats, which counts a command run by a script too (PUBLISH from
// the release script is in cmdstat_publish: see
// TestCostReadingsSeeScripts). The run takes about three minutes:
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

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
	"github.com/redis/rueidis"
)

const (
	// costWindow is how long each client pattern runs.
	costWindow = 4 * time.Second
	// costIdle is how long the idle agents are read over.
	costIdle = 3 * time.Second
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
	costNames    = 10_000
	costSessions = 10
	costBatch    = 100
	// costExpireTimeout bounds the wait for the release tombstones (15 s)
	// to expire.
	costExpireTimeout = 60 * time.Second
)

// costLock is the lock block of the agents: the defaults, under a key
// prefix whose names' release channels costChannels matches.
const costLock = "  key_prefix = \"cost:\"\n"

// costChannels matches every name's channel, and not the revocations
// channel that every agent subscribes to once.
const costChannels = "cost:{*"

var costAgentCounts = []int{1, 4, 16, 64}

func BenchmarkCost(b *testing.B) {
	for _, n := range costAgentCounts {
		b.Run(fmt.Sprintf("agents=%d", n), func(b *testing.B) { benchCostAgents(b, n) })
	}
	b.Run("names", benchCostNames)
}

// costPattern is one way the 64 clients pick names.
type costPattern struct {
	name   string
	fresh  bool // a fresh name under nameOf each cycle
	nameOf func(client int) string
}

var costPatterns = []costPattern{
	{name: "hot", nameOf: func(i int) string { return "hot/" + strconv.Itoa(i) }},
	{name: "cold", fresh: true, nameOf: func(i int) string { return "cold/" + strconv.Itoa(i) }},
	// Clients 4k … 4k+3 share name k: on agents 4k … 4k+3 mod N, four
	// different agents once there are four or more.
	{name: "shared", nameOf: func(i int) string {
		return "shared/" + strconv.Itoa(i/(costClients/costSharedNames))
	}},
}

// benchCostAgents runs n agent processes over three fresh masters, reads
// them idle, then under each client pattern.
func benchCostAgents(b *testing.B, n int) {
	servers := redistest.Start(b, 3)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "cost" + strconv.Itoa(i)
	}
	agents := startProcAgents(b, releaseBinary(b), servers, costLock, ids...)
	// Registered after their own stops, so run before them: all stop at once.
	b.Cleanup(func() {
		for _, a := range agents {
			a.cmd.Process.Signal(syscall.SIGTERM)
		}
	})
	masters := newCostMasters(b, servers)
	b.Run("idle", func(b *testing.B) { benchCostIdle(b, masters, agents) })
	clients := make([]locker, costClients)
	for i := range clients {
		clients[i] = dialLine(b, agents[i%n].sock)
	}
	for _, p := range costPatterns {
		b.Run(p.name, func(b *testing.B) { benchCostPattern(b, p, clients, masters, agents) })
	}
}

// benchCostIdle reads the agents with no client for costIdle: what they
// cost by being there (health probes, subscriptions), and the connections
// each master serves. The sleep is the measurement's window, not a wait for
// an event.
func benchCostIdle(b *testing.B, masters costMasters, agents []*procAgent) {
	for range b.N {
		before := readCost(b, masters, agents)
		time.Sleep(costIdle)
		after := readCost(b, masters, agents)
		took := after.at.Sub(before.at).Seconds()
		b.ReportMetric(100*(after.masters-before.masters).Seconds()/took, "masters-cpu-%")
		b.ReportMetric(100*(after.agents-before.agents).Seconds()/took, "agents-cpu-%")
		b.ReportMetric(float64(after.redisCalls()-before.redisCalls())/took, "redis-calls/s")
		b.ReportMetric(masters.meanInfo(b, "clients", "connected_clients"), "conns/master")
		var rss int64
		for _, a := range agents {
			rss += rssBytes(b, a.pid())
		}
		b.ReportMetric(float64(rss)/(1<<20)/float64(len(agents)), "agent-RSS-MiB")
	}
	b.ReportMetric(0, "ns/op")
}

// benchCostPattern runs the clients for costWindow with names picked by
// p, and reports what a LOCK+UNLOCK cycle cost. It reads the counters once
// no agent caches a name any more (every name channel unsubscribed), so
// that a cycle's cost includes its cache's release after the window.
func benchCostPattern(b *testing.B, p costPattern, clients []locker, masters costMasters, agents []*procAgent) {
	for round := range b.N {
		names := make([]string, len(clients))
		for i := range names {
			names[i] = p.nameOf(i) + "/" + strconv.Itoa(round)
		}
		masters.awaitQuiet(b)
		before := readCost(b, masters, agents)
		sampling := masters.sampleSubscriptions()
		w := runWorkers(b, clients, names, p.fresh, costWindow)
		subs := sampling.stop(b)
		masters.awaitQuiet(b)
		after := readCost(b, masters, agents)
		w.report(b)
		cycles := 0
		for _, g := range w.grants {
			cycles += g
		}
		if cycles == 0 {
			b.Fatal("no cycle in the window")
		}
		after.perCycle(b, before, float64(cycles))
		b.ReportMetric(subs.perChannel(), "subs/channel")
		b.ReportMetric(subs.channels(), "channels")
	}
	b.ReportMetric(0, "ns/op")
}

// costReading is what the masters and the agents used up to a moment.
type costReading struct {
	at      time.Time
	masters time.Duration    // the three together
	agents  time.Duration    // all of them together
	calls   map[string]int64 // commandstats calls by command, the masters summed
}

func readCost(b testing.TB, masters costMasters, agents []*procAgent) costReading {
	r := costReading{at: time.Now(), calls: map[string]int64{}}
	for _, m := range masters {
		r.masters += cpuTime(b, m.pid)
		for cmd, n := range m.calls(b) {
			r.calls[cmd] += n
		}
	}
	for _, a := range agents {
		r.agents += cpuTime(b, a.pid())
	}
	return r
}

// benchOwnCommands are what the benchmark itself sends the masters.
var benchOwnCommands = []string{"info", "pubsub|channels", "pubsub|numsub", "memory|usage", "ping"}

// redisCalls counts every command the masters ran, scripts and the
// commands they called each counted, but for the benchmark's own.
func (r costReading) redisCalls() int64 {
	var n int64
	for cmd, calls := range r.calls {
		n += calls
		for _, own := range benchOwnCommands {
			if cmd == own {
				n -= calls
			}
		}
	}
	return n
}

// perCycle reports what was used since before, per LOCK+UNLOCK cycle.
func (r costReading) perCycle(b *testing.B, before costReading, cycles float64) {
	delta := func(cmds ...string) float64 {
		var n int64
		for _, cmd := range cmds {
			n += r.calls[cmd] - before.calls[cmd]
		}
		return float64(n) / cycles
	}
	b.ReportMetric(float64((r.masters-before.masters).Microseconds())/cycles, "masters-µs/cycle")
	b.ReportMetric(float64((r.agents-before.agents).Microseconds())/cycles, "agents-µs/cycle")
	b.ReportMetric(delta("publish", "spublish"), "publish/cycle")
	b.ReportMetric(delta("evalsha", "eval", "evalsha_ro", "eval_ro"), "scripts/cycle")
	b.ReportMetric(delta("subscribe", "unsubscribe"), "sub+unsub/cycle")
	b.ReportMetric(float64(r.redisCalls()-before.redisCalls())/cycles, "redis-calls/cycle")
}

// costMaster is one master as the benchmark reads it from outside.
type costMaster struct {
	server *redistest.Server
	pid    int
	client rueidis.Client // for the replies redistest does not read
}

type costMasters []*costMaster

func newCostMasters(b testing.TB, servers []*redistest.Server) costMasters {
	out := make(costMasters, len(servers))
	for i, s := range servers {
		pid, err := strconv.Atoi(costInfo(b, s, "server")["process_id"])
		if err != nil {
			b.Fatalf("INFO server process_id: %v", err)
		}
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{s.Addr}, ForceSingleClient: true, DisableCache: true})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(c.Close)
		out[i] = &costMaster{server: s, pid: pid, client: c}
	}
	return out
}

// costInfo reads an INFO section of s as its fields.
func costInfo(b testing.TB, s *redistest.Server, section string) map[string]string {
	text, err := s.Info(section)
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			out[k] = v
		}
	}
	return out
}

// calls reads INFO commandstats: the calls of each command, named as
// Redis names them ("publish", "client|list").
func (m *costMaster) calls(b testing.TB) map[string]int64 {
	out := map[string]int64{}
	for k, v := range costInfo(b, m.server, "commandstats") {
		cmd, ok := strings.CutPrefix(k, "cmdstat_")
		calls, _, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
		n, err := strconv.ParseInt(calls, 10, 64)
		if !ok || err != nil {
			b.Fatalf("commandstats %s:%s", k, v)
		}
		out[cmd] = n
	}
	return out
}

// meanInfo is the mean of an INFO field over the masters.
func (ms costMasters) meanInfo(b testing.TB, section, field string) float64 {
	var sum float64
	for _, m := range ms {
		v, err := strconv.ParseFloat(costInfo(b, m.server, section)[field], 64)
		if err != nil {
			b.Fatalf("INFO %s %s: %v", section, field, err)
		}
		sum += v
	}
	return sum / float64(len(ms))
}

// awaitQuiet waits until no name's channel has a subscriber on any
// master: no agent caches or waits for a name any more.
func (ms costMasters) awaitQuiet(b testing.TB) {
	var left []int
	lockagenttest.Eventually(b, costQuietTimeout, func() bool {
		left = ms.subscribedNames(b)
		return len(left) == 0
	}, "name channels still subscribed on the masters: %v", &left)
}

// subscribedNames counts, for each master that has any, its name channels
// with a subscriber.
func (ms costMasters) subscribedNames(b testing.TB) []int {
	var out []int
	for _, m := range ms {
		if n := len(m.nameChannels(b)); n > 0 {
			out = append(out, n)
		}
	}
	return out
}

// nameChannels lists the name channels with a subscriber.
func (m *costMaster) nameChannels(b testing.TB) []string {
	chans, err := m.client.Do(context.Background(), m.client.B().PubsubChannels().Pattern(costChannels).Build()).AsStrSlice()
	if err != nil {
		b.Fatal(err)
	}
	return chans
}

// subSamples counts name channels and their subscribers, summed over
// the masters and the samples.
type subSamples struct {
	masters              int
	samples, chans, subs int64
	done                 chan struct{}
	wg                   sync.WaitGroup
	err                  error
}

// sampleSubscriptions counts every costSampleEvery until stop.
func (ms costMasters) sampleSubscriptions() *subSamples {
	s := &subSamples{masters: len(ms), done: make(chan struct{})}
	s.wg.Go(func() {
		tick := time.NewTicker(costSampleEvery)
		defer tick.Stop()
		for {
			select {
			case <-s.done:
				return
			case <-tick.C:
			}
			for _, m := range ms {
				if err := s.sample(m); err != nil {
					s.err = err
					return
				}
			}
			s.samples++
		}
	})
	return s
}

func (s *subSamples) sample(m *costMaster) error {
	ctx := context.Background()
	chans, err := m.client.Do(ctx, m.client.B().PubsubChannels().Pattern(costChannels).Build()).AsStrSlice()
	if err != nil || len(chans) == 0 {
		return err
	}
	counts, err := m.client.Do(ctx, m.client.B().PubsubNumsub().Channel(chans...).Build()).ToArray()
	if err != nil {
		return err
	}
	for i := 1; i < len(counts); i += 2 {
		n, err := counts[i].AsInt64()
		if err != nil {
			return err
		}
		s.subs += n
	}
	s.chans += int64(len(chans))
	return nil
}

// stop ends the sampling; it fails the benchmark if a sample failed.
func (s *subSamples) stop(b testing.TB) *subSamples {
	close(s.done)
	s.wg.Wait()
	if s.err != nil {
		b.Fatalf("counting subSamples: %v", s.err)
	}
	return s
}

// perChannel is the mean number of subscribers of a subscribed name
// channel (each agent subscribes once, however many of its clients wait).
func (s *subSamples) perChannel() float64 {
	if s.chans == 0 {
		return 0
	}
	return float64(s.subs) / float64(s.chans)
}

// channels is the mean number of subscribed name channels on a master.
func (s *subSamples) channels() float64 {
	if s.samples == 0 {
		return 0
	}
	return float64(s.chans) / float64(s.samples) / float64(s.masters)
}

// benchCostNames: one agent over three fresh masters; costNames fresh
// names locked and held, then released. It reports a master's memory per
// name (used_memory, the mean over the masters, above theirs before) while
// held, once released (the agent's caches of them ended, the release
// tombstones still there), and once the tombstones expired: what a name
// leaves for good, which is its fence counter (it never expires).
func benchCostNames(b *testing.B) {
	for range b.N {
		servers := redistest.Start(b, 3)
		a := startProcAgents(b, releaseBinary(b), servers, costLock, "names")[0]
		masters := newCostMasters(b, servers)
		conns := dialRaw(b, a.sock, costSessions)
		base := masters.memory(b)
		took := costPipeline(b, conns, "LOCK", " wait=10s")
		held := masters.memory(b)
		costPipeline(b, conns, "UNLOCK", "")
		masters.awaitQuiet(b)
		released := masters.memory(b)
		masters.awaitExpired(b, base.expires)
		left := masters.memory(b)
		perName := func(m costMemory) float64 { return (m.used - base.used) / costNames }
		b.ReportMetric(costNames/took.Seconds(), "locks/s")
		b.ReportMetric(perName(held), "held-B/name")
		b.ReportMetric(perName(released), "released-B/name")
		b.ReportMetric(perName(left), "left-B/name")
		b.ReportMetric((held.keys-base.keys)/costNames, "held-keys/name")
		b.ReportMetric((left.keys-base.keys)/costNames, "left-keys/name")
		b.ReportMetric(masters[0].memoryUsage(b, "cost:{names/0/0}:fence"), "fence-key-B")
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

// costMemory is what a master keeps, the mean over the masters.
type costMemory struct{ used, keys, expires float64 }

// memory reads used_memory (INFO memory) and db0's keys and keys with a
// TTL (INFO keyspace).
func (ms costMasters) memory(b testing.TB) costMemory {
	var out costMemory
	for _, m := range ms {
		used, err := strconv.ParseFloat(costInfo(b, m.server, "memory")["used_memory"], 64)
		if err != nil {
			b.Fatalf("INFO memory used_memory: %v", err)
		}
		out.used += used / float64(len(ms))
		for _, f := range strings.Split(costInfo(b, m.server, "keyspace")["db0"], ",") {
			k, v, _ := strings.Cut(f, "=")
			n, _ := strconv.ParseFloat(v, 64)
			switch k {
			case "keys":
				out.keys += n / float64(len(ms))
			case "expires":
				out.expires += n / float64(len(ms))
			}
		}
	}
	return out
}

// awaitExpired waits until the masters hold no more keys with a TTL than
// expires: the release tombstones are gone.
func (ms costMasters) awaitExpired(b testing.TB, expires float64) {
	var now costMemory
	lockagenttest.Eventually(b, costExpireTimeout, func() bool {
		now = ms.memory(b)
		return now.expires <= expires
	}, "keys with a TTL left on the masters: %+v", &now)
}

// memoryUsage is MEMORY USAGE of key: its bytes, the key's name and
// Redis's overhead for it included.
func (m *costMaster) memoryUsage(b testing.TB, key string) float64 {
	r, err := m.server.Do("MEMORY", "USAGE", key)
	n, perr := strconv.ParseFloat(r, 64)
	if err != nil || perr != nil {
		b.Fatalf("MEMORY USAGE %s: %q %v", key, r, err)
	}
	return n
}

// TestCostReadingsSeeScripts: what BenchmarkCost reads of a real master
// moves with what it does: a PUBLISH from a script counts in
// commandstats, a busy script in the CPU time of the pid INFO gives, and
// two subscribers of a name channel in the subscription samples, and
// awaitQuiet sees them go.
func TestCostReadingsSeeScripts(t *testing.T) {
	m := newCostMasters(t, redistest.Start(t, 1))[0]
	before := readCost(t, costMasters{m}, nil)
	sha, err := m.server.Do("SCRIPT", "LOAD", `redis.call('PUBLISH', KEYS[1], 'x')
local t = redis.call('TIME')
local start = t[1] * 1000000 + t[2]
repeat t = redis.call('TIME') until t[1] * 1000000 + t[2] - start > 300000`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.server.Do("EVALSHA", sha, "1", "cost:{x}:released"); err != nil {
		t.Fatal(err)
	}
	after := readCost(t, costMasters{m}, nil)
	if got := after.calls["publish"] - before.calls["publish"]; got != 1 {
		t.Errorf("a script's PUBLISH counted %d times in commandstats", got)
	}
	if cpu := after.masters - before.masters; cpu < 200*time.Millisecond {
		t.Errorf("a 300 ms busy script: %v of CPU in /proc/%d/stat", cpu, m.pid)
	}
	subscribers := []net.Conn{subscribeRaw(t, m.server.Addr, "cost:{x}:released"), subscribeRaw(t, m.server.Addr, "cost:{x}:released")}
	s := &subSamples{masters: 1}
	if err := s.sample(m); err != nil || s.chans != 1 || s.subs != 2 {
		t.Errorf("sampled %d name channels with %d subscribers (%v), want 1 with 2", s.chans, s.subs, err)
	}
	if left := (costMasters{m}).subscribedNames(t); len(left) != 1 || left[0] != 1 {
		t.Errorf("subscribed name channels %v, want [1]", left)
	}
	for _, c := range subscribers {
		c.Close()
	}
	costMasters{m}.awaitQuiet(t)
}

// subscribeRaw subscribes a new connection to channel, closed when the
// test ends if not before.
func subscribeRaw(t *testing.T, addr, channel string) net.Conn {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	fmt.Fprintf(nc, "*2\r\n$9\r\nSUBSCRIBE\r\n$%d\r\n%s\r\n", len(channel), channel)
	r := bufio.NewReader(nc)
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, ":") { // the subscription count ends the reply
			return nc
		}
	}
}
