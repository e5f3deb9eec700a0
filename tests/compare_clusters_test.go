package tests

import (
	"fmt"
	"testing"

	"github.com/lock-agent/lock-agent/internal/redistest"
)

// The agent over masters that are each a Redis Cluster, for
// BenchmarkCompare: the agent contender's two agent processes, settings
// and clients, over three clusters of 1 or 3 primaries (no replicas)
// instead of three standalone servers. A name's keys share its hash tag,
// so each cycle runs on one shard of each cluster; every gated script on a
// cluster master reads the server's run_id (INFO server), and releases are
// published on the cluster bus (see quorum/shards.go).
//
// The clusters and their agents start for each scenario alone and stop
// after it (about 8 s each), so that the other contenders' scenarios run
// beside no more processes than they did before.

// clusterShardCounts are the primaries per cluster of the cluster
// contenders.
var clusterShardCounts = []int{1, 3}

// clusterContenderName names the agent contender over three clusters of
// shards primaries each: agent-3x1shard, agent-3x3shards.
func clusterContenderName(shards int) string {
	if shards == 1 {
		return "agent-3x1shard"
	}
	return fmt.Sprintf("agent-3x%dshards", shards)
}

// newClusterAgents starts three clusters of shards primaries each and two
// agent processes, a and b, over them, bootstrapped as new masters; all
// stop when b (the benchmark that started them) ends.
func newClusterAgents(b *testing.B, shards int) *contender {
	clusters := make([]*redistest.Cluster, 3)
	for i := range clusters {
		clusters[i] = redistest.StartCluster(b, redistest.ClusterOptions{Shards: shards})
	}
	agents := startProcAgentsOver(b, releaseBinary(b), clusterMasters(clusters), compareLock, "a", "b")
	return newAgentContender(clusterContenderName(shards), [2]string{agents[0].sock, agents[1].sock})
}

// newClusterContenders starts every cluster contender, for b alone.
func newClusterContenders(b *testing.B) []*contender {
	out := make([]*contender, len(clusterShardCounts))
	for i, shards := range clusterShardCounts {
		out[i] = newClusterAgents(b, shards)
	}
	return out
}

// runEachCluster runs bench for each cluster contender, one sub-benchmark
// each, which starts the contender and stops it at its end.
func runEachCluster(b *testing.B, bench func(*testing.B, *contender)) {
	for _, shards := range clusterShardCounts {
		b.Run(clusterContenderName(shards), func(b *testing.B) {
			bench(b, newClusterAgents(b, shards))
			b.ReportMetric(0, "ns/op") // the window, not a figure
		})
	}
}
