package redistest

import (
	"fmt"
	"slices"
)

// RestartEmpty kills the shard's primary and starts it again on the same
// port with its nodes.conf, so with its node ID, config epoch and slots,
// but no data: a shard that restarted empty. Its replicas sync the empty
// data set from it. Returns once the cluster has settled (see
// StartCluster); a restarted primary waits 2s before it says
// cluster_state:ok (Redis's CLUSTER_WRITABLE_DELAY), so this takes 2s.
func (c *Cluster) RestartEmpty(sh *Shard) {
	c.t.Helper()
	// The primary is down only for a moment, but a replica must not be
	// elected meanwhile: the fault is the primary's, not a failover.
	c.setFailover(sh, false)
	sh.Primary.Restart()
	c.settle("the primary " + sh.Primary.Addr + " restarted empty")
	c.setFailover(sh, true)
}

// setFailover allows or forbids the shard's replicas to be elected when
// their primary fails (cluster-replica-no-failover).
func (c *Cluster) setFailover(sh *Shard, allowed bool) {
	c.t.Helper()
	noFailover := "yes"
	if allowed {
		noFailover = "no"
	}
	for _, r := range sh.Replicas {
		c.mustDo(r, "CONFIG", "SET", "cluster-replica-no-failover", noFailover)
	}
}

// Failover promotes the shard's first replica by a manual failover
// (CLUSTER FAILOVER on it, without FORCE): the replica catches up with its
// primary, which stops taking writes meanwhile, so no write is lost and the
// promotion does not wait for a failure to be detected. The old primary
// becomes the shard's last replica. Returns once the cluster has settled.
// The primary must answer (Redis drops a manual failover its primary does
// not join within 5s, and this fails the test); for a dead one use
// KillPrimary.
func (c *Cluster) Failover(sh *Shard) {
	c.t.Helper()
	if len(sh.Replicas) == 0 {
		c.t.Fatalf("redistest: cluster: shard of %s has no replica to fail over to", sh.Primary.Addr)
	}
	promoted, old := sh.Replicas[0], sh.Primary
	c.mustDo(promoted, "CLUSTER", "FAILOVER")
	sh.Primary, sh.Replicas = promoted, append(slices.Clone(sh.Replicas[1:]), old)
	c.settle("failover from " + old.Addr + " to " + promoted.Addr)
}

// KillPrimary kills the shard's primary and waits until the cluster has
// detected it (after the node timeout, 1s), elected one of its replicas
// in its place and settled. It returns the killed node, which is no
// longer part of the shard (see Rejoin).
func (c *Cluster) KillPrimary(sh *Shard) (killed *Server) {
	c.t.Helper()
	if len(sh.Replicas) == 0 {
		c.t.Fatalf("redistest: cluster: shard of %s has no replica to elect", sh.Primary.Addr)
	}
	killed = sh.Primary
	killed.Stop()
	var promoted *Server
	c.await("a replica of "+killed.Addr+" is elected", func() string {
		for _, r := range sh.Replicas {
			if info, err := r.Info("replication"); err == nil && InfoField(info, "role") == "master" {
				promoted = r
				return ""
			}
		}
		return fmt.Sprintf("no replica of %s is a primary yet", killed.Addr)
	})
	sh.Primary = promoted
	sh.Replicas = slices.DeleteFunc(slices.Clone(sh.Replicas), func(r *Server) bool { return r == promoted })
	c.settle(promoted.Addr + " took over from the killed " + killed.Addr)
	return killed
}

// Rejoin starts a node that KillPrimary killed again, empty, with its
// nodes.conf: it finds its slots taken by a newer epoch, becomes a replica
// of the shard's primary and syncs from it. Returns once the cluster has
// settled.
func (c *Cluster) Rejoin(sh *Shard, killed *Server) {
	c.t.Helper()
	killed.Launch()
	sh.Replicas = append(sh.Replicas, killed)
	c.settle(killed.Addr + " rejoined as a replica of " + sh.Primary.Addr)
}
