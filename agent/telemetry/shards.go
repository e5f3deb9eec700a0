package telemetry

import (
	"github.com/lock-agent/lock-agent/quorum"
	"github.com/prometheus/client_golang/prometheus"
)

// The series of each shard of a master that is a Redis Cluster, read at
// scrape time as the masters' are. The shard label is the shard's primary's
// address: it comes from the cluster's topology, so there are as many as
// shards, and a failover moves a shard's series to the promoted primary.
var (
	shardStateDesc = prometheus.NewDesc("lock_agent_shard_state",
		"For a master that is a Redis Cluster: 1 for the state each shard is in (up, down, quarantined, unsafe, settings), 0 for the others; shard is its primary's address.",
		[]string{"master", "shard", "state"}, nil)
	shardQuarantinedSlotsDesc = prometheus.NewDesc("lock_agent_shard_quarantined_slots",
		"For a master that is a Redis Cluster: how many of each shard's hash slots sit out a quarantine (they lost their data).",
		[]string{"master", "shard"}, nil)
)

// collectShards sends the series of each shard of master m; none for a
// standalone master. Should two shards show one address (a topology caught
// mid-change), the first one's series are sent: a series sent twice would
// fail the whole scrape.
func collectShards(ch chan<- prometheus.Metric, m quorum.MasterStatus) {
	seen := map[string]bool{}
	for _, s := range m.Shards {
		if seen[s.Address] {
			continue
		}
		seen[s.Address] = true
		for _, st := range masterStates {
			v := 0.0
			if s.State == st {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(shardStateDesc, prometheus.GaugeValue, v, m.Name, s.Address, string(st))
		}
		ch <- prometheus.MustNewConstMetric(shardQuarantinedSlotsDesc, prometheus.GaugeValue, float64(s.QuarantinedSlots), m.Name, s.Address)
	}
}
