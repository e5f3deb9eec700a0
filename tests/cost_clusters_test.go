package tests

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/redistest"
)

// BenchmarkCost over masters that are each a Redis Cluster (issue 20,
// item 4): clusters-3xS/agents=N runs the agents=N patterns over three
// fresh clusters of S primaries each (no replicas), and reads every node
// as it reads a standalone master. Besides, it counts the INFO calls the
// gated scripts make on a cluster master (each reads the server's run_id)
// and the release messages the nodes receive over the cluster bus: a
// PUBLISH on one node of a cluster reaches every other node.

// costClusterAgentCounts are the agent processes over clusters.
var costClusterAgentCounts = []int{1, 4}

// benchCostClusters runs n agent processes over three clusters of shards
// primaries each, as benchCostAgents runs them over standalone masters.
func benchCostClusters(b *testing.B, shards, n int) {
	clusters := make([]*redistest.Cluster, 3)
	for i := range clusters {
		clusters[i] = redistest.StartCluster(b, redistest.ClusterOptions{Shards: shards})
	}
	benchCostAgentsOver(b, clusterMasters(clusters), newClusterCostMasters(b, clusters), n)
}

// newClusterCostMasters reads every node of clusters, each as a node of
// the master its cluster is.
func newClusterCostMasters(b testing.TB, clusters []*redistest.Cluster) costMasters {
	var out costMasters
	for i, c := range clusters {
		for _, sh := range c.Shards() {
			for _, s := range sh.Nodes() {
				out = append(out, newCostMaster(b, s, i, true))
			}
		}
	}
	return out
}

// busPublished is how many published messages the node received over the
// cluster bus so far (CLUSTER INFO), each one a PUBLISH run on another
// node of its cluster.
func (m *costMaster) busPublished(b testing.TB) int64 {
	r, err := m.client.Do(context.Background(), m.client.B().ClusterInfo().Build()).ToString()
	if err != nil {
		b.Fatalf("CLUSTER INFO: %v", err)
	}
	for _, line := range strings.Split(r, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "cluster_stats_messages_publish_received:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				b.Fatalf("CLUSTER INFO %q: %v", line, err)
			}
			return n
		}
	}
	return 0 // none received yet: Redis lists a message type once it has one
}

// TestCostReadingsSeeClusterNodes: what BenchmarkCost reads of a Redis
// Cluster master moves with what its nodes do: a script's PUBLISH on one
// node of three counts once in commandstats and reaches the two others
// over the bus, its INFO counts (the benchmark's own do not), a
// subscriber on another node of the cluster is sampled on the one master
// the three nodes make, and a holder record on any node counts.
func TestCostReadingsSeeClusterNodes(t *testing.T) {
	cl := redistest.StartCluster(t, redistest.ClusterOptions{Shards: 3})
	ms := newClusterCostMasters(t, []*redistest.Cluster{cl})
	if ms.voters() != 1 {
		t.Fatalf("three nodes of one cluster read as %d masters", ms.voters())
	}
	const channel = "cost:{x}:released"
	subscribeRaw(t, cl.Owner(0).Primary.Addr, channel)
	before := readCost(t, ms, nil)
	on := cl.Owner(redistest.SlotOf("x")).Primary
	if _, err := on.Do("EVAL", "redis.call('PUBLISH', KEYS[1], 'x') redis.call('INFO', 'server')", "1", channel); err != nil {
		t.Fatal(err)
	}
	var after costReading
	if !pollFor(5*time.Second, 10*time.Millisecond, func() bool { // the bus sends no word of a delivery
		after = readCost(t, ms, nil)
		return after.bus-before.bus >= 2
	}) {
		t.Errorf("a PUBLISH on one node of three: %d messages received over the bus, want 2", after.bus-before.bus)
	}
	if !after.clustered {
		t.Error("a cluster's reading is not marked clustered")
	}
	for cmd, want := range map[string]int64{"publish": 1, "info": 1} {
		if got := after.calls[cmd].calls - before.calls[cmd].calls; got != want {
			t.Errorf("%s counted %d times, want %d (the script's alone)", cmd, got, want)
		}
	}
	s := &subSamples{pattern: channelsOf("x"), masters: ms.voters()}
	for _, m := range ms {
		if err := s.sample(m); err != nil {
			t.Fatal(err)
		}
	}
	if s.samples++; s.chans != 1 || s.subs != 1 || s.channels() != 1 {
		t.Errorf("sampled %d name channels with %d subscribers, %v per master; want 1 with 1, 1", s.chans, s.subs, s.channels())
	}
	cl.Owner(redistest.SlotOf("y")).Primary.Do("SET", "cost:{y}:h:a", "1", "PX", "200")
	if n := ms.records(); n != 1 {
		t.Errorf("%d holder records, want 1", n)
	}
}

// costBusPublishes is how many PUBLISHes benchCostBus sends.
const costBusPublishes = 20_000

// benchCostBus: what a PUBLISH costs a cluster of shards primaries, its
// own node and the others that receive it over the bus, with no agent:
// costBusPublishes PUBLISHes on a channel nobody subscribes to, one at a
// time, to the node that serves its slot, as a release script does.
func benchCostBus(b *testing.B, shards int) {
	cl := redistest.StartCluster(b, redistest.ClusterOptions{Shards: shards})
	ms := newClusterCostMasters(b, []*redistest.Cluster{cl})
	const channel = "cost:{bus}:released"
	on := ms[0]
	for _, m := range ms {
		if m.server == cl.Owner(redistest.SlotOf("bus")).Primary {
			on = m
		}
	}
	ctx := context.Background()
	for range b.N {
		before := readCost(b, ms, nil)
		for range costBusPublishes {
			if err := on.client.Do(ctx, on.client.B().Publish().Channel(channel).Message("x").Build()).Error(); err != nil {
				b.Fatal(err)
			}
		}
		want := before.bus + int64(costBusPublishes*(shards-1))
		var after costReading
		if !pollFor(10*time.Second, 10*time.Millisecond, func() bool { after = readCost(b, ms, nil); return after.bus >= want }) { // the bus sends no word of a delivery
			b.Fatalf("%d of %d messages received over the bus", after.bus-before.bus, want-before.bus)
		}
		n := float64(costBusPublishes)
		b.ReportMetric(float64((after.masters-before.masters).Microseconds())/n, "nodes-µs/publish")
		b.ReportMetric(float64(after.calls["publish"].usec-before.calls["publish"].usec)/n, "publish-cmd-µs")
		b.ReportMetric(float64(after.bus-before.bus)/n, "bus-publish/publish")
	}
	b.ReportMetric(0, "ns/op")
}
