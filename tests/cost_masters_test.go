package tests

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/redistest"
	"github.com/redis/rueidis"
)

// How BenchmarkCost reads the masters and the agents from outside: CPU
// from /proc, commands from INFO commandstats, memory from INFO memory and
// keyspace, subscriptions from PUBSUB.

// costReading is what the masters and the agents used up to a moment.
type costReading struct {
	at      time.Time
	masters time.Duration      // every master's server together, less the benchmark's own commands
	agents  time.Duration      // all of them together
	calls   map[string]cmdStat // by command, the masters summed
	// clustered: the masters are Redis Clusters, and bus is the messages
	// of published releases their nodes received over the cluster bus.
	clustered bool
	bus       int64
}

// cmdStat is one command's line of INFO commandstats.
type cmdStat struct{ calls, usec int64 }

// benchOwnCommands are what the benchmark itself sends the masters: their
// calls are left out of the counts and their time out of the masters' CPU.
// INFO is not one of them: the agents send it too (a safety check every
// probe), and on a Redis Cluster master every gated script calls INFO
// server; only the benchmark's own INFOs are taken out of its count (see
// costMaster.info), their time left in (tens of µs a reading).
var benchOwnCommands = []string{"keys", "pubsub|channels", "pubsub|numsub", "memory|usage", "cluster|info"}

func readCost(b testing.TB, masters costMasters, agents []*procAgent) costReading {
	r := costReading{at: time.Now(), calls: map[string]cmdStat{}}
	for _, m := range masters {
		r.masters += cpuTime(b, m.pid)
		// Read before the INFO below, which this reading's stats do not count yet.
		own := m.ownInfo.Load()
		for cmd, st := range m.commandStats(b) {
			if cmd == "info" {
				st.calls -= own
			}
			sum := r.calls[cmd]
			r.calls[cmd] = cmdStat{sum.calls + st.calls, sum.usec + st.usec}
		}
		if m.cluster {
			r.clustered = true
			r.bus += m.busPublished(b)
		}
	}
	for _, cmd := range benchOwnCommands {
		r.masters -= time.Duration(r.calls[cmd].usec) * time.Microsecond
		delete(r.calls, cmd)
	}
	for _, a := range agents {
		r.agents += cpuTime(b, a.pid())
	}
	return r
}

// redisCalls counts every command the masters ran: scripts, and the
// commands they called, each counted.
func (r costReading) redisCalls() int64 {
	var n int64
	for _, st := range r.calls {
		n += st.calls
	}
	return n
}

// perCycle reports what was used since before, per LOCK+UNLOCK cycle;
// the CPU also net of what idle agents would have used over as long (a
// share that grows with the agents while the cycles do not).
func (r costReading) perCycle(b *testing.B, before costReading, cycles float64, idle costIdle) {
	delta := func(cmds ...string) float64 {
		var n int64
		for _, cmd := range cmds {
			n += r.calls[cmd].calls - before.calls[cmd].calls
		}
		return float64(n) / cycles
	}
	b.ReportMetric(float64((r.masters-before.masters).Microseconds())/cycles, "masters-µs/cycle")
	b.ReportMetric(float64((r.agents-before.agents).Microseconds())/cycles, "agents-µs/cycle")
	took := r.at.Sub(before.at).Seconds()
	b.ReportMetric(((r.masters-before.masters).Seconds()-idle.masters*took)*1e6/cycles, "masters-net-µs/cycle")
	b.ReportMetric(((r.agents-before.agents).Seconds()-idle.agents*took)*1e6/cycles, "agents-net-µs/cycle")
	b.ReportMetric(delta("publish", "spublish"), "publish/cycle")
	b.ReportMetric(delta("evalsha", "eval", "evalsha_ro", "eval_ro"), "scripts/cycle")
	b.ReportMetric(delta("subscribe", "unsubscribe"), "sub+unsub/cycle")
	b.ReportMetric(float64(r.redisCalls()-before.redisCalls())/cycles, "redis-calls/cycle")
	if r.clustered {
		b.ReportMetric(delta("info"), "info/cycle")
		b.ReportMetric(float64(r.bus-before.bus)/cycles, "bus-publish/cycle")
	}
}

// costMaster is one master as the benchmark reads it from outside: a
// standalone server, or one node of a master that is a Redis Cluster.
type costMaster struct {
	server  *redistest.Server
	voter   int  // which master it is, or is a node of
	cluster bool // a node of a Redis Cluster
	pid     int
	client  rueidis.Client // for the replies redistest does not read
	ownInfo atomic.Int64   // INFO calls the benchmark sent it
}

type costMasters []*costMaster

func newCostMasters(b testing.TB, servers []*redistest.Server) costMasters {
	out := make(costMasters, len(servers))
	for i, s := range servers {
		out[i] = newCostMaster(b, s, i, false)
	}
	return out
}

// newCostMaster reads server s, which is master voter or a node of it.
func newCostMaster(b testing.TB, s *redistest.Server, voter int, cluster bool) *costMaster {
	m := &costMaster{server: s, voter: voter, cluster: cluster}
	pid, err := strconv.Atoi(m.info(b, "server")["process_id"])
	if err != nil {
		b.Fatalf("INFO server process_id: %v", err)
	}
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{s.Addr}, ForceSingleClient: true, DisableCache: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	m.pid, m.client = pid, c
	return m
}

// voters is how many masters ms are the servers of.
func (ms costMasters) voters() int {
	seen := map[int]bool{}
	for _, m := range ms {
		seen[m.voter] = true
	}
	return len(seen)
}

// info reads an INFO section of m, counting the call as the benchmark's.
func (m *costMaster) info(b testing.TB, section string) map[string]string {
	m.ownInfo.Add(1)
	return costInfo(b, m.server, section)
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

// commandStats reads INFO commandstats, by command as Redis names them
// ("publish", "client|list").
func (m *costMaster) commandStats(b testing.TB) map[string]cmdStat {
	out := map[string]cmdStat{}
	for k, v := range m.info(b, "commandstats") {
		cmd, ok := strings.CutPrefix(k, "cmdstat_")
		var st cmdStat
		_, err := fmt.Sscanf(v, "calls=%d,usec=%d,", &st.calls, &st.usec)
		if !ok || err != nil {
			b.Fatalf("commandstats %s:%s: %v", k, v, err)
		}
		out[cmd] = st
	}
	return out
}

// meanInfo is the mean of an INFO field over the masters' servers.
func (ms costMasters) meanInfo(b testing.TB, section, field string) float64 {
	var sum float64
	for _, m := range ms {
		v, err := strconv.ParseFloat(m.info(b, section)[field], 64)
		if err != nil {
			b.Fatalf("INFO %s %s: %v", section, field, err)
		}
		sum += v
	}
	return sum / float64(len(ms))
}

// costSettledCalls is the most Redis calls a second per agent of masters
// whose agents only probe them: ~20 an agent on standalone masters, ~80
// on three clusters of three shards, where an agent that starts reads
// every one of the 16,384 slots' markers of each (see quorum's
// sweepSlots), tens of thousands a second for a second or more.
const costSettledCalls = 1000

// awaitSettled waits until the masters' calls a second fall to what n
// agents that only probe make: their start-up work is over, and the idle
// reading will not count it.
func (ms costMasters) awaitSettled(b testing.TB, n int) {
	var rate float64
	last := readCost(b, ms, nil)
	if !pollFor(costQuietTimeout, costSampleEvery, func() bool { // the masters send no signal
		now := readCost(b, ms, nil)
		took := now.at.Sub(last.at)
		if took < time.Second { // a rate over a second at least
			return false
		}
		rate = float64(now.redisCalls()-last.redisCalls()) / took.Seconds()
		last = now
		return rate < float64(costSettledCalls*n)
	}) {
		b.Fatalf("the masters still ran %.0f calls a second %v after %d agents started", rate, costQuietTimeout, n)
	}
}

// costRecords matches the holder records of every name under the
// benchmark's key prefix (see costLock).
const costRecords = "cost:{*}:h:*"

// costPollEvery is how often awaitReleased looks: KEYS walks the whole
// keyspace (its time is taken out of the masters' CPU, see readCost).
const costPollEvery = 100 * time.Millisecond

// awaitReleased waits until no master has a holder record: every agent
// released every name, its caches of them included (they linger
// lock.cache_linger after the last UNLOCK).
func (ms costMasters) awaitReleased(b testing.TB) {
	held := 0
	if !pollFor(costQuietTimeout, costPollEvery, func() bool { held = ms.records(); return held == 0 }) { // the masters send no signal
		b.Fatalf("%d holder records still on the masters after %v", held, costQuietTimeout)
	}
}

// records counts the holder records on all the masters.
func (ms costMasters) records() int {
	n := 0
	for _, m := range ms {
		n += m.server.Keys(costRecords)
	}
	return n
}

// channelsOf matches the release channels of the names under stem.
func channelsOf(stem string) string { return "cost:{" + stem + "*" }

// channels lists the channels matching pattern that have a subscriber.
func (m *costMaster) channels(pattern string) ([]string, error) {
	return m.client.Do(context.Background(), m.client.B().PubsubChannels().Pattern(pattern).Build()).AsStrSlice()
}

// meanChannels is how many channels matching pattern have a subscriber,
// the mean over the masters (a cluster's nodes summed: an agent subscribes
// on one of them).
func (ms costMasters) meanChannels(b testing.TB, pattern string) float64 {
	n := 0
	for _, m := range ms {
		chans, err := m.channels(pattern)
		if err != nil {
			b.Fatal(err)
		}
		n += len(chans)
	}
	return float64(n) / float64(ms.voters())
}

// subSamples counts channels and their subscribers, summed over the
// masters and the samples.
type subSamples struct {
	pattern              string
	masters              int
	samples, chans, subs int64
	done                 chan struct{}
	wg                   sync.WaitGroup
	err                  error
}

// sampleSubscriptions counts the channels matching pattern and their
// subscribers every costSampleEvery until stop.
func (ms costMasters) sampleSubscriptions(pattern string) *subSamples {
	s := &subSamples{pattern: pattern, masters: ms.voters(), done: make(chan struct{})}
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
	chans, err := m.channels(s.pattern)
	if err != nil || len(chans) == 0 {
		return err
	}
	counts, err := m.client.Do(context.Background(), m.client.B().PubsubNumsub().Channel(chans...).Build()).ToArray()
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
		b.Fatalf("counting subscriptions: %v", s.err)
	}
	return s
}

// perChannel is the mean number of subscribers of a subscribed channel
// (an agent subscribes once, however many of its clients wait).
func (s *subSamples) perChannel() float64 {
	if s.chans == 0 {
		return 0
	}
	return float64(s.subs) / float64(s.chans)
}

// channels is the mean number of subscribed channels on a master.
func (s *subSamples) channels() float64 {
	if s.samples == 0 {
		return 0
	}
	return float64(s.chans) / float64(s.samples) / float64(s.masters)
}

// costMemory is what a master keeps, the mean over the masters.
type costMemory struct{ used, dataset, keys, expires float64 }

// memory reads used_memory and used_memory_dataset (INFO memory) and db0's
// keys and keys with a TTL (INFO keyspace).
func (ms costMasters) memory(b testing.TB) costMemory {
	var out costMemory
	for _, m := range ms {
		info := m.info(b, "memory")
		used, err := strconv.ParseFloat(info["used_memory"], 64)
		dataset, derr := strconv.ParseFloat(info["used_memory_dataset"], 64)
		if err != nil || derr != nil {
			b.Fatalf("INFO memory: %v %v", err, derr)
		}
		out.used += used / float64(len(ms))
		out.dataset += dataset / float64(len(ms))
		for _, f := range strings.Split(m.info(b, "keyspace")["db0"], ",") {
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
	if !pollFor(costExpireTimeout, costPollEvery, func() bool { now = ms.memory(b); return now.expires <= expires }) { // keys expire without a word
		b.Fatalf("keys with a TTL left on the masters after %v: %+v", costExpireTimeout, now)
	}
}

// costKeys are the bytes of one name's keys (MEMORY USAGE).
type costKeys struct {
	holder                 string // the holder id, in its record's key
	set, record, tombstone float64
}

// nameKeys reads the keys of name, which one holder holds.
func (m *costMaster) nameKeys(b testing.TB, name string) costKeys {
	set := "cost:{" + name + "}"
	members, err := m.client.Do(context.Background(), m.client.B().Smembers().Key(set).Build()).AsStrSlice()
	if err != nil || len(members) != 1 {
		b.Fatalf("SMEMBERS %s: %q %v", set, members, err)
	}
	return costKeys{holder: members[0], set: m.memoryUsage(b, set), record: m.memoryUsage(b, set+":h:"+members[0])}
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
// moves with what it does: a PUBLISH and INFOs from a script count in
// commandstats (and not the benchmark's own INFO), a busy script in the
// CPU time of the pid INFO gives, two subscribers of a name channel in the
// subscription samples, and holder records in records.
func TestCostReadingsSeeScripts(t *testing.T) {
	m := newCostMasters(t, redistest.Start(t, 1))[0]
	ms := costMasters{m}
	before := readCost(t, ms, nil)
	// The script spins until its server used 200 ms of CPU by its own
	// account (INFO cpu, getrusage), however long a loaded host makes that,
	// and returns how many INFOs it called.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	infos, err := m.client.Do(ctx, m.client.B().Eval().Script(`redis.call('PUBLISH', KEYS[1], 'x')
local calls = 0
local function cpu()
  calls = calls + 1
  local info = redis.call('INFO', 'cpu')
  return tonumber(string.match(info, 'used_cpu_user:([%d.]+)')) + tonumber(string.match(info, 'used_cpu_sys:([%d.]+)'))
end
local start = cpu()
repeat until cpu() - start > 0.2
return calls`).Numkeys(1).Key("cost:{x}:released").Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	after := readCost(t, ms, nil)
	if got := after.calls["publish"].calls - before.calls["publish"].calls; got != 1 {
		t.Errorf("a script's PUBLISH counted %d times in commandstats", got)
	}
	// /proc counts in ticks of 10 ms: two readings may miss up to 20 ms.
	if cpu := after.masters - before.masters; cpu < 180*time.Millisecond {
		t.Errorf("a script that used 200 ms of CPU: %v of CPU in /proc/%d/stat", cpu, m.pid)
	}
	if got := after.calls["info"].calls - before.calls["info"].calls; got != infos {
		t.Errorf("a script's %d INFOs and the benchmark's own counted as %d calls, want the script's", infos, got)
	}
	for range 2 {
		subscribeRaw(t, m.server.Addr, "cost:{x}:released")
	}
	s := &subSamples{pattern: channelsOf("x"), masters: 1}
	if err := s.sample(m); err != nil || s.chans != 1 || s.subs != 2 {
		t.Errorf("sampled %d name channels with %d subscribers (%v), want 1 with 2", s.chans, s.subs, err)
	}
	m.server.Do("SET", "cost:{x}:h:a", "1", "PX", "200")
	m.server.Do("SET", "cost:{x}:fence", "1")
	if n := ms.records(); n != 1 {
		t.Errorf("%d holder records, want 1", n)
	}
	ms.awaitReleased(t)
}

// subscribeRaw subscribes a new connection to channel until the test ends.
func subscribeRaw(t *testing.T, addr, channel string) {
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
			return
		}
	}
}
