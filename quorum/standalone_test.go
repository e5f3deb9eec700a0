package quorum

import (
	"context"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/redistest"
	"github.com/lock-agent/lock-agent/quorum/scripts"
)

func TestFailoverMargin(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     MasterConfig
		gateArg string
		want    string
	}{
		{"a master without replicas to promote keeps the quarantine", MasterConfig{Address: "h:1"}, "1110 1 lease=1s", "1110 1 lease=1s"},
		{"a Sentinel master sits out 1s of lag and the slack more", MasterConfig{Sentinels: []string{"h:2"}, MasterSet: "m"}, "1110 1 lease=1s", "4210 1 lease=1s"},
		{"a master given a replica lag sits out that lag and the slack more", MasterConfig{Address: "h:1", ReplicaLag: 3 * time.Second}, "1110 0 ", "6210 0 "},
		{"a gate argument it cannot read is left as it is", MasterConfig{ReplicaLag: time.Second}, "soon 1 x", "soon 1 x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &master{cfg: tc.cfg}
			if got := m.lengthenQuarantine(tc.gateArg); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestGateArgsLengthenTheQuarantine: the margin reaches the gate argument
// of every script that runs the gate, right after its epoch argument.
func TestGateArgsLengthenTheQuarantine(t *testing.T) {
	m := &master{cfg: MasterConfig{Sentinels: []string{"h:2"}, MasterSet: "m"}}
	args := []string{"holder", "1000", "prefix", "epoch", "1000 1 s"}
	got := m.gateArgs(scripts.Acquire, args)
	if got[3] != "epoch;" || got[4] != "4100 1 s" || args[4] != "1000 1 s" {
		t.Fatalf("got %q from %q", got, args)
	}
}

// TestANewConnectionReadsTheRunID: a master's client that follows a
// failover to a server that was a primary before (it kept its script
// cache) and holds a copy of the marker the agent verified on the other
// server must not vote on EVALSHA's word: the first vote on each new
// connection reads the server's run_id, finds another server, and plants
// a quarantine. Without a new connection (the first acquire) the copy is
// trusted, which is what the guard is for.
func TestANewConnectionReadsTheRunID(t *testing.T) {
	servers := redistest.Start(t, 1)
	cfg := testConfig(t, servers, time.Second, true)
	cfg.ProbeInterval = time.Hour // one probe, at the start: none races the votes
	c := startCluster(t, cfg)
	ctx := context.Background()
	if _, err := acquire(ctx, c, req("warm", "h")); err != nil {
		t.Fatal(err)
	}
	// What a failover to a server with a copy of the marker leaves: the
	// marker names a run_id that is not the server's, the one the agent
	// verified (on the server it copied the marker from).
	other := "0123456789abcdef0123456789abcdef01234567"
	if _, err := servers[0].Do("HSET", cfg.KeyPrefix+"epoch", "run", other); err != nil {
		t.Fatal(err)
	}
	c.masters[0].runID.Store(&other)
	if _, err := acquire(ctx, c, req("a", "h")); err != nil {
		t.Fatalf("on the connection it verified, the copy was not trusted (%v): the test shows nothing", err)
	}
	c.masters[0].dialed(laneRounds) // as the client does when it follows a failover
	if _, err := acquire(ctx, c, req("b", "h")); err == nil {
		t.Fatal("a new connection's first vote was counted without reading the server's run_id")
	}
	waitStates(t, c, func(st []MasterStatus) bool { return st[0].State == StateQuarantined })
}

// TestReplicaGuardOnRealServers: a primary whose replicas may be promoted
// votes only while it refuses writes without all of them, within the
// master's replica lag; each way to get it wrong is shown with what to set.
func TestReplicaGuardOnRealServers(t *testing.T) {
	outer := t // the second replica outlives its subtest
	primary := redistest.StartWith(t, "--min-replicas-to-write", "1", "--min-replicas-max-lag", "1")
	redistest.StartReplica(t, primary, "")
	primary.AwaitInfo(5*time.Second, "replication", "min_slaves_good_slaves", "1")
	cfg := testConfig(t, []*redistest.Server{primary}, time.Second, true)
	cfg.Masters[0].ReplicaLag = time.Second
	cfg.SafetyInterval = 20 * time.Millisecond
	c := startCluster(t, cfg)
	for _, tc := range []struct {
		name   string
		set    []string // CONFIG SET arguments, or "REPLICA" for one more replica
		reason string   // "" for safe
	}{
		{"without min-replicas-to-write it is unsafe", []string{"min-replicas-to-write", "0"}, "connected_slaves:1-without-min-replicas-to-write"},
		{"with a lag longer than the master's it is unsafe", []string{"min-replicas-to-write", "1", "min-replicas-max-lag", "5"}, "min-replicas-max-lag:5>max_replica_lag:1s"},
		{"with every replica within the lag it votes", []string{"min-replicas-max-lag", "1"}, ""},
		{"a replica that need not acknowledge makes it unsafe", []string{"REPLICA"}, "min-replicas-to-write:1<connected_slaves:2"},
		{"with both replicas acknowledging it votes", []string{"min-replicas-to-write", "2"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.set[0] == "REPLICA" {
				redistest.StartReplica(outer, primary, "")
			} else if _, err := primary.Do(append([]string{"CONFIG", "SET"}, tc.set...)...); err != nil {
				t.Fatal(err)
			}
			waitStates(t, c, func(st []MasterStatus) bool {
				if tc.reason == "" {
					return st[0].State == StateUp
				}
				return st[0].State == StateUnsafe && st[0].Err == "unsafe master: "+tc.reason
			})
		})
	}
}

// TestSentinelMasterStatus: a Sentinel master shows the server it is on,
// and one whose master set the Sentinels do not know is down, saying so.
func TestSentinelMasterStatus(t *testing.T) {
	primary := redistest.StartWith(t)
	sentinel := redistest.StartSentinel(t, redistest.MasterSet{Name: "known", Addr: primary.Addr})
	cfg := testConfig(t, []*redistest.Server{primary, primary}, time.Second, true)
	cfg.Masters[0] = MasterConfig{Name: "known", Sentinels: []string{sentinel.Addr}, MasterSet: "known"}
	cfg.Masters[1] = MasterConfig{Name: "typo", Sentinels: []string{sentinel.Addr}, MasterSet: "knwon"}
	c := runCluster(t, cfg)
	waitStates(t, c, func(st []MasterStatus) bool {
		return st[0].State == StateUp && st[0].Address == "known@"+primary.Addr &&
			st[1].State == StateDown && st[1].Address == "knwon@?" &&
			st[1].Err == `the Sentinels know no primary of master_set "knwon" (No such master with that name)`
	})
}
