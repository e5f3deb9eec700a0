package config

import (
	"strings"

	"github.com/lock-agent/lock-agent/agent"
	"github.com/lock-agent/lock-agent/quorum"
)

// cluster checks a master that is a Redis Cluster: its seed nodes, and
// nothing that belongs to another kind of master. A cluster fails over its
// own shards, so the Sentinel settings have no place here; allow_replicas
// and max_replica_lag keep their meaning, for each shard's replicas.
func (v *validator) cluster(b redisBlock, m *quorum.MasterConfig, errorf errorFunc) {
	seeds := *b.Cluster
	if len(seeds) == 0 {
		errorf("cluster", "want at least one seed node, cluster = [\"host:port\", ...]: any nodes of the cluster (the agent learns the others from them); two or three, so that one down does not keep the agent out")
	}
	for _, s := range seeds {
		hostPort(s, "cluster", errorf)
	}
	m.Cluster = seeds
	if b.Address != nil {
		errorf("cluster", "give address (one Redis server) or cluster (the seed nodes of a Redis Cluster), not both")
	}
	if len(b.Sentinels) > 0 {
		errorf("cluster", "give sentinels and master_set (a primary that Sentinel fails over) or cluster (a Redis Cluster, which fails over its own shards), not both")
	}
	for _, s := range []struct {
		attr string
		set  bool
	}{{"master_set", b.MasterSet != nil}, {"sentinel_username", b.SentinelUsername != nil}, {"sentinel_password", b.SentinelPassword != nil}} {
		if s.set && len(b.Sentinels) == 0 {
			errorf(s.attr, "%s goes with sentinels, not cluster: a Redis Cluster fails over its shards itself; remove it", s.attr)
		}
	}
	if b.DB != nil && *b.DB != 0 {
		errorf("db", "a Redis Cluster has database 0 only: remove db (lock.key_prefix keeps the agent's keys apart from other data)")
	}
}

// clusterKeyPrefix refuses a key prefix with a brace once some master is
// a Redis Cluster. A cluster hashes a key by its first {...}, and every
// key of a name carries the name as that tag so that they share a slot; a
// tag in the prefix would come first and put every name in one slot, on
// one shard.
func (v *validator) clusterKeyPrefix(c *agent.Config) {
	if !strings.ContainsAny(c.Lock.KeyPrefix, "{}") {
		return
	}
	for _, m := range c.Masters {
		if len(m.Cluster) > 0 {
			v.errorf("lock", "", "key_prefix", "master %q is a Redis Cluster, which hashes a key by its first {...}: a { or } in the prefix (%q) would put every name's keys in one slot, on one shard; use a prefix without braces, such as \"lock-agent:\"",
				m.Name, c.Lock.KeyPrefix)
			return
		}
	}
}
