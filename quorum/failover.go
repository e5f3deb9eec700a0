package quorum

import (
	"fmt"
	"strings"
	"time"

	"github.com/lock-agent/lock-agent/quorum/scripts"
	"github.com/redis/rueidis"
)

// A master may be a primary with replicas that a Sentinel (or an operator)
// promotes when the primary fails. A promoted replica has its own run_id
// and its primary's copy of the marker, so the gate meets it as a server
// that may have missed the last grants (see scripts/lua/gate.lua): it sits out a
// quarantine. What the run_id cannot catch is a split brain: an old
// primary that still takes writes from an agent that still reaches it,
// while other agents already use the promoted one. Redis bounds that with
// min-replicas-to-write and min-replicas-max-lag on the primary: cut off
// from its replicas, it refuses writes (NOREPLICAS) once their last
// acknowledgement is older than the lag. Its replicas stop acknowledging
// when one is promoted at the latest, and the primary notices within the
// lag plus two seconds (acknowledgements every second, ages counted in
// whole seconds, checked every second). So a master that may be a
// promoted replica sits out that much longer than the quarantine: every
// hold the old primary granted or renewed after the promotion has ended
// before the promoted one votes. docs/operations.md "The masters" has the
// settings.

// failoverSlack is how long after its replicas' last acknowledgement a
// primary with min-replicas-max-lag S may still take writes, beyond S.
const failoverSlack = 2*time.Second + 100*time.Millisecond

// sentinelRefresh is how often a Sentinel master's client asks the
// Sentinels where the primary is, beside their +switch-master events (a
// missed event would otherwise keep it on the old primary for good).
const sentinelRefresh = time.Second

// replicaLag is cfg.ReplicaLag, 1s by default for a Sentinel master and
// a Redis Cluster (whose shards fail over to their replicas).
func (cfg MasterConfig) replicaLag() time.Duration {
	if cfg.ReplicaLag == 0 && (len(cfg.Sentinels) > 0 || len(cfg.Cluster) > 0) {
		return time.Second
	}
	return cfg.ReplicaLag
}

// failoverMargin is how much longer than the quarantine a master that
// may be a promoted replica sits out: 0 for one whose replicas are never
// promoted.
func (cfg MasterConfig) failoverMargin() time.Duration {
	if lag := cfg.replicaLag(); lag > 0 {
		return lag + failoverSlack
	}
	return 0
}

// withSentinels makes opt ask the master's Sentinels for its primary, if
// it has any. Retries stay off: the client follows a failover by itself,
// and a lock script is never sent twice.
func (m *master) withSentinels(opt rueidis.ClientOption) rueidis.ClientOption {
	if len(m.cfg.Sentinels) == 0 {
		return opt
	}
	opt.InitAddress = m.cfg.Sentinels
	// The client pings a connection that received nothing for KeepAlive,
	// and drops it if the ping is not answered within ConnWriteTimeout. A
	// following of the Sentinel waits for that on an old primary that no
	// longer answers (it asks it for its ROLE, holding the client's lock):
	// at the default 30s, for the whole of a failover.
	opt.Dialer.KeepAlive = sentinelRefresh
	opt.Sentinel = rueidis.SentinelOption{
		MasterSet:               m.cfg.MasterSet,
		Username:                m.cfg.SentinelUsername,
		Password:                m.cfg.SentinelPassword,
		Dialer:                  opt.Dialer,
		TLSConfig:               opt.TLSConfig,
		TopologyRefreshInterval: sentinelRefresh,
	}
	return opt
}

// dialed hears of every connection the master's lane l makes: a new one
// may be to another server (a Sentinel's client following a failover, a
// restarted master), so the next probe checks its configuration again
// rather than keep the old server's verdict (a demoted primary is a
// replica; a promoted one may lack min-replicas-to-write), and the next
// vote on the lane reads the server's run_id (see uncheckedRun).
func (m *master) dialed(l lane) {
	m.dials[l].Add(1)
	m.mu.Lock()
	m.checked = time.Time{}
	m.mu.Unlock()
}

// uncheckedRun says whether a call of s on lane l must read the server's
// run_id (run s's fallback, which does: see scripts.Script.AfterRestart), and
// returns the lane's connection count to record once one did. It must
// when s runs the gate and the lane made a connection since a call last
// read it. A promoted replica answers EVALSHA with NOSCRIPT, so its first
// vote reads it anyway, but a primary demoted and later promoted again
// keeps its script cache (REPLICAOF does not clear it), and holds a copy
// of the marker that the agent verified on the other server: without the
// run_id, its votes would count until the probe's connection follows.
// (A connection is counted when it is dialed, a moment before the client
// sends on it: a call that reads the run_id on the old one in between is
// taken for a check of the new one.)
func (m *master) uncheckedRun(l lane, s *scripts.Script) (gen uint64, unchecked bool) {
	if s.AfterRestart == nil {
		return 0, false
	}
	gen = m.dials[l].Load()
	return gen, m.runChecked[l].Load() < gen
}

// checkedRun records that lane l read the server's run_id on connection
// gen, if any of the results is an answer of the script (an error reply
// may be the gate's write refused before it planted a marker).
func (m *master) checkedRun(l lane, gen uint64, results ...rueidis.RedisResult) {
	for _, r := range results {
		if r.Error() != nil {
			continue
		}
		for {
			old := m.runChecked[l].Load()
			if old >= gen || m.runChecked[l].CompareAndSwap(old, gen) {
				return
			}
		}
	}
}

// sentinelErr is what a failed connection of a Sentinel master means: an
// answer from the Sentinels, rather than a network error, is that they know
// no primary of the master set (a typo in master_set, or a set they do not
// monitor: "No such master with that name"). Unwrapped, it would read as
// the master's own error.
func (m *master) sentinelErr(err error) error {
	if _, answered := rueidis.IsRedisErr(err); len(m.cfg.Sentinels) == 0 || !answered {
		return err
	}
	return fmt.Errorf("the Sentinels know no primary of master_set %q (%v)", m.cfg.MasterSet, err)
}

// addressOf is the master's address for STATUS: its own, or for a
// Sentinel master "SET@server", the server c now sends to ("SET@?"
// before it connected).
func (m *master) addressOf(c rueidis.Client) string {
	if len(m.cfg.Cluster) > 0 {
		return "cluster@" + strings.Join(m.cfg.Cluster, ",")
	}
	if len(m.cfg.Sentinels) == 0 {
		return m.cfg.Address
	}
	server := "?"
	if c != nil {
		for addr := range c.Nodes() {
			server = addr
		}
	}
	return m.cfg.MasterSet + "@" + server
}
