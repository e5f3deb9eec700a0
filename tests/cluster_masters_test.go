package tests

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
	"github.com/lock-agent/lock-agent/quorum"
)

// The checkers of kinds_chaos_test.go over masters that are each a Redis
// Cluster of three shards (issue 20 item 1): a shard restarted empty, a
// slot migrated, and a shard failed over to its replica, while clients on
// two agents take and release one name in the slot hit.

// twoAgentsOverClusters starts n clusters of opts and two agents whose
// masters they are, bootstrapped as new ones.
func twoAgentsOverClusters(t *testing.T, n int, opts redistest.ClusterOptions, lease time.Duration) (a, b *agenttest.Agent, clusters []*redistest.Cluster) {
	for range n {
		clusters = append(clusters, redistest.StartCluster(t, opts))
	}
	var masters []quorum.MasterConfig
	for i, cl := range clusters {
		masters = append(masters, quorum.MasterConfig{Name: fmt.Sprintf("m%d", i), Cluster: cl.Seeds()})
	}
	c1 := agenttest.ConfigNoBootstrap(t, nil, lease)
	c1.Masters, c1.AgentID = masters, "host-a"
	c2 := agenttest.ConfigNoBootstrap(t, nil, lease)
	c2.Masters, c2.AgentID = masters, "host-b"
	// A primary that guards a split brain (min-replicas-to-write) refuses
	// writes until its replica acknowledges, which a loaded host delays.
	var err error
	if !pollFor(20*time.Second, 50*time.Millisecond, func() bool {
		_, err = quorum.Bootstrap(context.Background(), c1.Lock.KeyPrefix, c1.Masters)
		return err == nil
	}) {
		t.Fatalf("bootstrap: %v", err)
	}
	return agenttest.Start(t, c1), agenttest.Start(t, c2), clusters
}

// slotMarker is the key of slot's epoch marker with prefix (see
// quorum's slotTags: the first decimal number in the slot).
func slotMarker(prefix string, slot int) string {
	for i := 0; ; i++ {
		if tag := strconv.Itoa(i); redistest.SlotOf(tag) == slot {
			return prefix + "epoch{" + tag + "}"
		}
	}
}

// markerEpoch is the epoch of the marker of name's slot on cl ("" if none).
func markerEpoch(a *agenttest.Agent, cl *redistest.Cluster, name string) string {
	slot := redistest.SlotOf(name)
	epoch, _ := cl.Owner(slot).Primary.Do("HGET", slotMarker(a.Config.Lock.KeyPrefix, slot), "epoch")
	return epoch
}

// replanted waits until the marker of name's slot on cl is one the gate
// planted anew since its epoch was before: the agents met the slot as a
// server that may have lost grants, and it sits out a quarantine.
func replanted(a *agenttest.Agent, cl *redistest.Cluster, name, before string) bool {
	return pollFor(10*time.Second, 10*time.Millisecond, func() bool {
		epoch := markerEpoch(a, cl, name)
		return epoch != "" && epoch != before
	})
}

// replantDiag logs what a slot of name's that was not planted anew looks
// like: its marker's fields on the shard's primary as the test knows it
// (or the error each read met), that primary's run_id and replicas (a
// primary with min-replicas-to-write refuses a plant while they lag), and
// each agent's STATUS (its shards, their states, the slots it quarantines).
func replantDiag(t *testing.T, cl *redistest.Cluster, name string, agents ...*agenttest.Agent) {
	t.Helper()
	slot := redistest.SlotOf(name)
	p := cl.Owner(slot).Primary
	key := slotMarker(agents[0].Config.Lock.KeyPrefix, slot)
	var fields []string
	for _, f := range []string{"epoch", "run", "until", "tails", "settings"} {
		v, err := p.Do("HGET", key, f)
		if err != nil {
			fields = append(fields, fmt.Sprintf("%s: %v", f, err))
			continue
		}
		fields = append(fields, fmt.Sprintf("%s=%q", f, v))
	}
	server, err := p.Info("server")
	repl, err2 := p.Info("replication")
	t.Logf("slot %d's marker %s on %s: %s; its run_id %s, role %s, connected_slaves %s, min_slaves_good_slaves %s (%v %v)",
		slot, key, p.Addr, strings.Join(fields, " "), redistest.InfoField(server, "run_id"), redistest.InfoField(repl, "role"),
		redistest.InfoField(repl, "connected_slaves"), redistest.InfoField(repl, "min_slaves_good_slaves"), err, err2)
	for _, a := range agents {
		t.Logf("%s's STATUS:\n%s", a.Config.AgentID, rawStatus(t, a))
	}
}

// voting waits until agent a sees no slot of its masters quarantined (its
// STATUS shows no quarantined_slots= on a shard).
func voting(t *testing.T, a *agenttest.Agent) bool {
	var last string
	if pollFor(20*time.Second, 20*time.Millisecond, func() bool {
		last = rawStatus(t, a)
		return !strings.Contains(last, "quarantined_slots=")
	}) {
		return true
	}
	t.Logf("STATUS: %s", last)
	return false
}

// rawStatus is a's STATUS reply as it is sent: a cluster master's line
// repeats its shard= field, which agenttest's maps keep one of.
func rawStatus(t *testing.T, a *agenttest.Agent) string {
	conn, err := net.Dial("unix", a.Config.Socket.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(conn, "1 STATUS\n") // tagged, as agenttest sends
	var b strings.Builder
	r := bufio.NewReader(conn)
	for {
		line, err := r.ReadString('\n')
		b.WriteString(line)
		words := strings.Fields(line) // "[TAG] DATA ...", then "[TAG] OK ..."
		if err != nil || slices.Contains(words[:min(2, len(words))], "OK") || slices.Contains(words[:min(2, len(words))], "ERR") {
			return b.String()
		}
	}
}

// clusterChaos runs kindsWhile on one name over three clusters while
// fault(cluster, shard of the name's slot) hits one cluster at a time,
// each next one once the last one's slot votes again; it returns the
// holds and how many faults it made.
func clusterChaos(t *testing.T, opts redistest.ClusterOptions, name string, fault func(cl *redistest.Cluster, sh *redistest.Shard, rng *rand.Rand)) ([]kindHold, int) {
	a, b, clusters := twoAgentsOverClusters(t, 3, opts, time.Second)
	faults := 0
	held := kindsWhile(t, a, b, func(_ watch, stop time.Time, rng *rand.Rand) {
		for round := 0; round < 1 || time.Now().Before(stop); round++ {
			cl := clusters[round%len(clusters)]
			before := markerEpoch(a, cl, name)
			fault(cl, cl.Owner(redistest.SlotOf(name)), rng)
			faults++
			if !replanted(a, cl, name, before) {
				replantDiag(t, cl, name, a, b)
				t.Errorf("round %d: the slot of %s was never planted anew", round, name)
				return
			}
			if !voting(t, a) || !voting(t, b) {
				t.Errorf("round %d: the slot of %s never voted again", round, name)
				return
			}
		}
	}, soak(12*time.Second, 30*time.Second), name, 6, func(int, *rand.Rand) string { return "LOCK " + name })
	if err := checkHolds(held, name, 1); err != nil {
		t.Fatal(err)
	}
	return held, faults
}

// TestClusterMastersShardRestartedEmpty: the shard that serves the name
// restarts empty in one cluster after another: that slot sits out its
// quarantine on that master only; no two holds overlap, fences grow.
func TestClusterMastersShardRestartedEmpty(t *testing.T) {
	held, faults := clusterChaos(t, redistest.ClusterOptions{Shards: 3}, "cl-restart",
		func(cl *redistest.Cluster, sh *redistest.Shard, _ *rand.Rand) { cl.RestartEmpty(sh) })
	t.Logf("%d holds (%d lost) over three clusters, %d shards restarted empty: no overlap, fences grow", len(held), countLost(held), faults)
}

// TestClusterMastersSlotMigrated: the name's slot moves, with its keys,
// to another shard, half-migrated for a while, while clients take and
// release it: no overlap, fences grow, and no hold is lost (one master
// at a time is in migration or quarantine).
func TestClusterMastersSlotMigrated(t *testing.T) {
	name := "cl-migrate"
	held, faults := clusterChaos(t, redistest.ClusterOptions{Shards: 3}, name, func(cl *redistest.Cluster, sh *redistest.Shard, rng *rand.Rand) {
		to := cl.Shards()[0]
		if to == sh {
			to = cl.Shards()[1]
		}
		m := cl.BeginMigration(redistest.SlotOf(name), to)
		for range 1 + rng.IntN(3) {
			m.MoveKeys(1)
			metHalfWay(sh.Primary)
		}
		m.Finish()
	})
	if lost := countLost(held); lost > 0 {
		t.Fatalf("%d of %d holds lost while one master at a time migrated the slot", lost, len(held))
	}
	t.Logf("%d holds over three clusters, the slot migrated %d times: no overlap, fences grow, none lost", len(held), faults)
}

// metHalfWay waits (up to a second) until a client met the half-migrated
// slot on its source: an ASK or TRYAGAIN more in its error stats.
func metHalfWay(source *redistest.Server) {
	redirects := func() int {
		info, _ := source.Info("errorstats")
		n := 0
		for _, kind := range []string{"ASK", "TRYAGAIN"} {
			if _, rest, ok := strings.Cut(info, "errorstat_"+kind+":count="); ok {
				c, _ := strconv.Atoi(strings.TrimSpace(strings.SplitN(rest, "\n", 2)[0]))
				n += c
			}
		}
		return n
	}
	before := redirects()
	pollFor(time.Second, 5*time.Millisecond, func() bool { return redirects() > before })
}

// TestClusterMastersShardFailover: the shard that serves the name fails
// over to its replica (its primary guards a split brain with
// min-replicas-to-write), under load: the promoted replica's copy of the
// slot's marker records the old primary's run_id, so the slot sits out a
// quarantine; no two holds overlap.
func TestClusterMastersShardFailover(t *testing.T) {
	opts := redistest.ClusterOptions{Shards: 3, Replicas: 1, Args: []string{"--min-replicas-to-write", "1", "--min-replicas-max-lag", "1"}}
	held, faults := clusterChaos(t, opts, "cl-failover", func(cl *redistest.Cluster, sh *redistest.Shard, _ *rand.Rand) { cl.Failover(sh) })
	t.Logf("%d holds (%d lost) over three clusters, %d shards failed over: no overlap, fences grow", len(held), countLost(held), faults)
}

// TestClusterMasterQuarantinesOneShardOnly: with one cluster wholly paused
// and one shard of another restarted empty, a name in that shard's slots
// has no majority, and a name in another shard's has one: the shard sits
// out alone.
func TestClusterMasterQuarantinesOneShardOnly(t *testing.T) {
	a, _, clusters := twoAgentsOverClusters(t, 3, redistest.ClusterOptions{Shards: 3}, time.Second)
	c := agenttest.Dial(t, a.Config.Socket.Path)
	lost := clusters[0].Shards()[0]
	var inLost, elsewhere string
	for i := 0; inLost == "" || elsewhere == ""; i++ {
		name := fmt.Sprintf("q%d", i)
		if clusters[0].Owner(redistest.SlotOf(name)) == lost {
			inLost = cmpOr(inLost, name)
		} else {
			elsewhere = cmpOr(elsewhere, name)
		}
	}
	before := markerEpoch(a, clusters[0], inLost)
	clusters[0].RestartEmpty(lost)
	for _, sh := range clusters[1].Shards() {
		sh.Primary.Pause()
		defer sh.Primary.Resume()
	}
	// Not granted: NO_QUORUM, or BUSY when a retry within the wait met the
	// last try's grant on the one cluster that votes before its give-back.
	if r := c.Do("LOCK " + inLost + " wait=300ms"); r.Kind == "OK" {
		t.Fatalf("LOCK %s in the emptied shard, with the other cluster paused: %s, want no majority", inLost, r.Line)
	}
	lockagenttest.Eventually(t, 5*time.Second, func() bool { return c.Do("LOCK "+elsewhere+" wait=300ms").Kind == "OK" },
		"a name in another shard of the same cluster was never granted")
	if !replanted(a, clusters[0], inLost, before) {
		replantDiag(t, clusters[0], inLost, a)
		t.Fatal("the emptied shard's slot was not planted anew")
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
