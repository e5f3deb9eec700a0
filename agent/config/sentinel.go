package config

import (
	"strings"
	"time"

	"github.com/lock-agent/lock-agent/quorum"
)

// where checks how a redis block reaches its master: one address, the
// Sentinels that know where the primary of a master set is, or the seed
// nodes of a Redis Cluster (see cluster.go). A Sentinel
// master's replicas are promoted by design, so allow_replicas (which says
// they never are) does not go with it.
func (v *validator) where(b redisBlock, m *quorum.MasterConfig, errorf errorFunc) {
	switch {
	case b.Cluster != nil:
		v.cluster(b, m, errorf)
	case b.Address != nil && len(b.Sentinels) > 0:
		errorf("sentinels", "give address (a master) or sentinels and master_set (a primary that Sentinel fails over), not both")
	case b.Address != nil:
		m.Address = *b.Address
		hostPort(*b.Address, "address", errorf)
	case len(b.Sentinels) > 0:
		v.sentinels(b, m, errorf)
	default:
		errorf("address", "want address = \"host:port\", or sentinels = [\"host:port\", ...] and master_set = \"NAME\", or cluster = [\"host:port\", ...] (a Redis Cluster)")
	}
	if b.Address != nil && len(b.Sentinels) == 0 && b.Cluster == nil && (b.MasterSet != nil || b.SentinelUsername != nil || b.SentinelPassword != nil) {
		errorf("master_set", "master_set, sentinel_username and sentinel_password go with sentinels, not address")
	}
	if b.MaxReplicaLag != nil {
		m.ReplicaLag = replicaLag(*b.MaxReplicaLag, errorf)
	}
}

// sentinels checks a Sentinel master: its Sentinels, its master set, and
// no allow_replicas.
func (v *validator) sentinels(b redisBlock, m *quorum.MasterConfig, errorf errorFunc) {
	m.Sentinels = b.Sentinels
	for _, s := range b.Sentinels {
		hostPort(s, "sentinels", errorf)
	}
	if b.MasterSet == nil || *b.MasterSet == "" {
		errorf("master_set", "sentinels need master_set: the name the Sentinels monitor the primary by (sentinel monitor NAME ...)")
	} else {
		m.MasterSet = *b.MasterSet
	}
	if b.SentinelUsername != nil {
		m.SentinelUsername = *b.SentinelUsername
	}
	if b.SentinelPassword != nil {
		m.SentinelPassword = *b.SentinelPassword
	}
	if b.AllowReplicas != nil && *b.AllowReplicas {
		errorf("allow_replicas", "allow_replicas says no replica is ever promoted, which a Sentinel does: remove it, and set min-replicas-to-write and min-replicas-max-lag on the primaries (see max_replica_lag)")
	}
}

// replicaLag reads max_replica_lag: whole seconds, as Redis counts
// min-replicas-max-lag, and at least one.
func replicaLag(s string, errorf errorFunc) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil || d < time.Second || d%time.Second != 0 {
		errorf("max_replica_lag", "want whole seconds, at least \"1s\" (the primary's min-replicas-max-lag may be at most this), got %q", s)
		return 0
	}
	return d
}

func hostPort(addr, attr string, errorf errorFunc) {
	if host, port, ok := strings.Cut(addr, ":"); !ok || host == "" || port == "" {
		errorf(attr, "want host:port, got %q", addr)
	}
}
