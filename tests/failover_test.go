package tests

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/agent"
	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/faultproxy"
	"github.com/lock-agent/lock-agent/internal/history"
	"github.com/lock-agent/lock-agent/internal/redistest"
	"github.com/lock-agent/lock-agent/quorum"
)

// guarded are the arguments of a primary that refuses writes once its
// replica has not acknowledged for more than a second (the agent's
// max_replica_lag default for a Sentinel master): a split brain is bounded.
var guarded = []string{"--min-replicas-to-write", "1", "--min-replicas-max-lag", "1"}

// failoverLease is the agents' lease: a promoted replica sits out a
// quarantine of about it plus the failover margin (1s lag + 2.1s).
const failoverLease = time.Second

// failoverRun is two agents with clients that lock two names, recording
// what they saw.
type failoverRun struct {
	t       *testing.T
	agents  []*agenttest.Agent
	control []*agenttest.Conn // a session per agent, for STATUS
	h       *history.History
	stop    chan struct{}
	wait    func()
}

// startFailoverRun starts one agent per config (made by agenttest.Config,
// which bootstrapped the masters by their addresses), and two clients per
// agent that lock "a" or "b", hold briefly and release, until check.
func startFailoverRun(t *testing.T, cfgs ...agent.Config) *failoverRun {
	r := &failoverRun{t: t, h: history.New(), stop: make(chan struct{})}
	var odd atomic.Int64
	var wg sync.WaitGroup
	for i, cfg := range cfgs {
		cfg.AgentID = fmt.Sprintf("host-%d", i)
		r.agents = append(r.agents, agenttest.Start(t, cfg))
		r.control = append(r.control, agenttest.Dial(t, cfg.Socket.Path))
		for j := range 2 {
			rc := &recClient{t: t, id: 2*i + j, kind: "lock", conn: agenttest.Dial(t, cfg.Socket.Path), h: r.h, held: map[string]int64{}, odd: &odd}
			wg.Add(1)
			go func() {
				defer wg.Done()
				rc.run(r.stop, func(rng *rand.Rand) (string, []string) {
					name := []string{"a", "b"}[rng.IntN(2)]
					return "LOCK " + name + " wait=300ms", []string{name}
				}, briefly)
			}()
		}
	}
	r.wait = wg.Wait
	return r
}

// note puts what the test did into the history and the log, for whoever
// reads a failure.
func (r *failoverRun) note(what string) {
	r.t.Log(what)
	r.h.Add(history.Event{Client: -1, Type: history.Info, Detail: what})
}

// awaitGrants waits until the clients were granted n more locks than
// they had when it was called.
func (r *failoverRun) awaitGrants(n int) {
	r.t.Helper()
	count := func() int {
		got := 0
		for _, e := range r.h.Events() {
			if e.Type == history.OK {
				got++
			}
		}
		return got
	}
	want := count() + n
	got := 0
	lockagenttest.Eventually(r.t, 15*time.Second, func() bool { got = count(); return got >= want }, "%d grants, want %d", &got, want)
}

// check stops the clients and checks the history: no two holders at once,
// fences that only grow, and progress.
func (r *failoverRun) check() {
	r.t.Helper()
	close(r.stop)
	r.wait()
	events := r.h.Events()
	rep := history.Check(events, progressWindow)
	r.t.Logf("history of %d events: %d holds, %d lost", rep.Events, rep.Holds, rep.Lost)
	if err := rep.Err(); err != nil {
		r.t.Fatalf("%v\n(the whole history: %s)", err, dumpHistory(r.t, events))
	}
}

// awaitMaster polls agent a's STATUS until its master m is as want says,
// and returns that master's line.
func (r *failoverRun) awaitMaster(a, m int, timeout time.Duration, want func(map[string]string) bool, what string) map[string]string {
	r.t.Helper()
	var line map[string]string
	lockagenttest.Eventually(r.t, timeout, func() bool {
		if d := r.control[a].Do("STATUS").Data; len(d) > m {
			line = d[m]
		}
		return line != nil && want(line)
	}, "agent %d never saw master %d %s: %v", a, m, what, &line)
	return line
}

// awaitQuarantineOn waits until each of agents sees master m on server
// addr sitting out a quarantine longer than the agent's own (the failover
// margin is added), and then voting.
func (r *failoverRun) awaitQuarantineOn(m int, addr string, agents ...int) {
	r.t.Helper()
	on := func(l map[string]string) bool { return strings.HasSuffix(l["address"], "@"+addr) }
	for _, a := range agents {
		q := r.awaitMaster(a, m, 10*time.Second, func(l map[string]string) bool {
			return on(l) && l["state"] == "quarantined" && l["quarantine_left"] != ""
		}, "quarantined on "+addr)
		left, _ := strconv.Atoi(q["quarantine_left"])
		r.note(fmt.Sprintf("agent %d: master %d quarantined on %s, %dms left", a, m, addr, left))
		if base := agent.Quarantine(r.agents[a].Config.Lock); time.Duration(left)*time.Millisecond <= base {
			r.t.Errorf("agent %d saw master %d quarantined for %dms, no more than its quarantine %v: no failover margin", a, m, left, base)
		}
	}
	for _, a := range agents {
		r.awaitMaster(a, m, 15*time.Second, func(l map[string]string) bool { return on(l) && l["state"] == "up" }, "up on "+addr)
		r.note(fmt.Sprintf("agent %d: master %d votes on %s", a, m, addr))
	}
}

// sentinelMasters are configs' masters reached through the Sentinel, by
// the master sets named m0, m1, ...
func sentinelMasters(cfg *agent.Config, sentinel *redistest.Sentinel, which ...int) {
	for _, i := range which {
		cfg.Masters[i] = quorum.MasterConfig{Name: cfg.Masters[i].Name, Sentinels: []string{sentinel.Addr}, MasterSet: fmt.Sprintf("m%d", i)}
	}
}

// startPairs starts n guarded primaries with a replica each, in sync, and
// the master sets the Sentinel is to watch, m<first>, m<first+1>, ...
func startPairs(t *testing.T, first, n int) (primaries, replicas []*redistest.Server, sets []redistest.MasterSet) {
	for i := first; i < first+n; i++ {
		p := redistest.StartWith(t, guarded...)
		primaries, replicas = append(primaries, p), append(replicas, redistest.StartReplica(t, p, "", guarded...))
		p.AwaitInfo(5*time.Second, "replication", "min_slaves_good_slaves", "1") // else it refuses the bootstrap
		sets = append(sets, redistest.MasterSet{Name: fmt.Sprintf("m%d", i), Addr: p.Addr})
	}
	return primaries, replicas, sets
}

// TestFailoverKilledPrimary (issue 20, item 2): three masters, each a
// primary with a replica watched by a Sentinel; two agents reach them
// through the Sentinel while their clients lock. A primary is killed
// (SIGKILL) under load: the Sentinel promotes its replica, both agents
// follow it, and the promoted one (its own run_id, its primary's marker,
// maybe not the last grants) sits out a quarantine before it votes. The
// old primary comes back empty as the new one's replica (without one the
// new primary refuses writes). No two holders at once, fences only grow.
func TestFailoverKilledPrimary(t *testing.T) {
	t.Parallel()
	primaries, replicas, sets := startPairs(t, 0, 3)
	sentinel := redistest.StartSentinel(t, sets...)
	var cfgs []agent.Config
	for range 2 {
		cfg := agenttest.Config(t, primaries, failoverLease)
		sentinelMasters(&cfg, sentinel, 0, 1, 2)
		cfgs = append(cfgs, cfg)
	}
	r := startFailoverRun(t, cfgs...)
	for a := range r.agents {
		r.awaitMaster(a, 0, 5*time.Second, func(l map[string]string) bool { return l["address"] == "m0@"+primaries[0].Addr }, "on its primary")
	}
	r.awaitGrants(20)

	r.note("kill the primary of m0")
	primaries[0].Stop()
	sentinel.AwaitPrimary(20*time.Second, "m0", replicas[0].Addr)
	r.note("m0's replica promoted; the old primary restarts empty, as its replica")
	// Until it has a replica the new primary refuses writes (NOREPLICAS):
	// the agents show m0 down. The Sentinel would make the old primary a
	// replica too, but only at its next look (up to 10s).
	primaries[0].Restart()
	host, port, _ := strings.Cut(replicas[0].Addr, ":")
	if _, err := primaries[0].Do("REPLICAOF", host, port); err != nil {
		t.Fatal(err)
	}
	r.awaitQuarantineOn(0, replicas[0].Addr, 0, 1)
	r.awaitGrants(20)
	r.check()
}

// TestFailoverSplitBrain (issue 20, item 2): the primary of m0 is not
// killed but cut off from its Sentinel and its replica (a black hole: no
// connection ends), while agent 0 still reaches it directly (an address,
// as an agent that does not follow the failover would) and agent 1
// follows the Sentinel to the promoted replica. Two primaries of m0 take
// writes for a while. The old one refuses writes once its replica has
// been silent for its min-replicas-max-lag (1s), and the promoted one sits
// out the quarantine and the failover margin first: no two holders at once.
func TestFailoverSplitBrain(t *testing.T) {
	t.Parallel()
	primary := redistest.StartWith(t, guarded...)
	link, err := faultproxy.New(primary.Addr) // what the Sentinel and the replica reach it by
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(link.Close)
	// Unguarded: promoted, it must take writes with no replica of its own.
	replica := redistest.StartReplica(t, primary, link.Addr)
	primary.AwaitInfo(5*time.Second, "replication", "min_slaves_good_slaves", "1") // else it refuses the bootstrap
	others, _, sets := startPairs(t, 1, 2)
	primaries := append([]*redistest.Server{primary}, others...)
	sentinel := redistest.StartSentinel(t, append([]redistest.MasterSet{{Name: "m0", Addr: link.Addr}}, sets...)...)
	direct := agenttest.Config(t, primaries, failoverLease)
	direct.Masters[0].ReplicaLag = time.Second // replicas that may be promoted, under the guard
	sentinelMasters(&direct, sentinel, 1, 2)
	following := agenttest.Config(t, primaries, failoverLease)
	sentinelMasters(&following, sentinel, 0, 1, 2)
	r := startFailoverRun(t, direct, following)
	r.awaitMaster(0, 0, 5*time.Second, func(l map[string]string) bool { return l["state"] == "up" }, "up")
	r.awaitGrants(20)

	r.note("cut m0's primary off from its Sentinel and replica")
	link.SetMode(faultproxy.BlackHole)
	sentinel.AwaitPrimary(20*time.Second, "m0", replica.Addr)
	r.note("m0's replica promoted: two primaries")
	if info, err := primary.Info("replication"); err != nil || redistest.InfoField(info, "role") != "master" {
		t.Fatalf("the old primary is not a primary any more, so there is no split brain: %v %q", err, info)
	}
	primary.AwaitInfo(10*time.Second, "replication", "min_slaves_good_slaves", "0")
	r.note("the old primary refuses writes")
	r.awaitQuarantineOn(0, replica.Addr, 1)
	r.awaitGrants(20) // both primaries up, the old one refusing writes
	r.note("heal: the Sentinel makes the old primary a replica")
	link.SetMode(faultproxy.Pass)
	// When the Sentinel turns the old primary into a replica is the
	// Sentinel's timing (it finds the old primary back by its periodic
	// INFO, every 10s), not the agent's: a parallel run beside two CPU hogs
	// saw no change in the 20s this test once allowed for both. The agent
	// is then judged on its own step.
	primary.AwaitInfo(60*time.Second, "replication", "role", "slave")
	r.note("the Sentinel made the old primary a replica")
	r.awaitMaster(0, 0, 20*time.Second, func(l map[string]string) bool {
		return l["state"] != "up" && (strings.HasPrefix(l["reason"], "READONLY") || strings.Contains(l["reason"], "role:slave"))
	}, "refusing to vote, a replica now")
	// The promoted primary was started without min-replicas-to-write (it
	// had to take writes alone): once it has a replica the agent says what
	// to set.
	r.awaitMaster(1, 0, 10*time.Second, func(l map[string]string) bool {
		return l["state"] == "unsafe" && strings.Contains(l["reason"], "connected_slaves:1-without-min-replicas-to-write")
	}, "unsafe for want of min-replicas-to-write")
	r.awaitGrants(10)
	r.check()
}
