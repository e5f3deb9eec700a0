package redistest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// SlotCount is how many hash slots a Redis Cluster has.
const SlotCount = 16384

// ClusterOptions shape a test cluster.
type ClusterOptions struct {
	// Shards is how many primaries share the slots, each an equal range
	// in order; default 3 (the fewest a cluster elects a failover with).
	Shards int
	// Replicas is how many replicas each shard has; default 0.
	Replicas int
	// Args are more arguments every node starts with (and a restart
	// keeps), e.g. "--cluster-require-full-coverage", "no"; they come
	// after the harness's own (see clusterArgs), so they may override
	// them, e.g. "--cluster-node-timeout", "3000".
	Args []string
}

// Cluster is a Redis Cluster of real redis-server processes on random
// loopback ports; the test's cleanup stops them all. It knows which shard
// owns each slot and which node is each shard's primary, follows the
// changes its own methods make (failover, migration), and after each one
// waits until every node agrees with it. Use it from one goroutine.
type Cluster struct {
	t      testing.TB
	shards []*Shard
	owner  [SlotCount]*Shard
	nodes  map[*Server]*node // every node started, killed ones too
}

// Shard is one primary and its replicas, and the slots it owns.
type Shard struct {
	Primary  *Server
	Replicas []*Server
	c        *Cluster
}

// node is what the harness knows of a node beyond its Server.
type node struct {
	id  string // its cluster node ID, which survives a restart (nodes.conf)
	bus int    // its cluster bus port
}

// SlotRange is the hash slots First through Last, both included.
type SlotRange struct{ First, Last int }

func (r SlotRange) String() string {
	if r.First == r.Last {
		return strconv.Itoa(r.First)
	}
	return strconv.Itoa(r.First) + "-" + strconv.Itoa(r.Last)
}

// StartCluster starts a cluster of opts.Shards primaries with
// opts.Replicas replicas each, and returns once every node says
// cluster_state:ok, every node sees the same slots and replicas, and
// every replica is in sync with its primary. It skips or fails the test
// when redis-server is missing as Start does.
func StartCluster(t testing.TB, opts ClusterOptions) *Cluster {
	t.Helper()
	Start(t, 0)
	if opts.Shards <= 0 {
		opts.Shards = 3
	}
	c := &Cluster{t: t, nodes: map[*Server]*node{}}
	for i := range opts.Shards {
		sh := &Shard{c: c, Primary: c.startNode(opts.Args)}
		for range opts.Replicas {
			sh.Replicas = append(sh.Replicas, c.startNode(opts.Args))
		}
		first, last := i*SlotCount/opts.Shards, (i+1)*SlotCount/opts.Shards-1
		for slot := first; slot <= last; slot++ {
			c.owner[slot] = sh
		}
		c.shards = append(c.shards, sh)
	}
	// Registered after the nodes' cleanups: runs before their directories go.
	t.Cleanup(c.logOnFailure)
	c.create()
	return c
}

// Seeds are the addresses (host:port) of the primaries.
func (c *Cluster) Seeds() []string {
	var out []string
	for _, sh := range c.shards {
		out = append(out, sh.Primary.Addr)
	}
	return out
}

// Shards are the shards, in the order of the slots they started with.
func (c *Cluster) Shards() []*Shard { return c.shards }

// Owner is the shard that owns slot.
func (c *Cluster) Owner(slot int) *Shard { return c.owner[slot] }

// Slots are the slots the shard owns, in order.
func (sh *Shard) Slots() []SlotRange {
	var out []SlotRange
	for slot, owner := range sh.c.owner {
		switch {
		case owner != sh:
		case len(out) > 0 && out[len(out)-1].Last == slot-1:
			out[len(out)-1].Last = slot
		default:
			out = append(out, SlotRange{slot, slot})
		}
	}
	return out
}

// Nodes are the shard's primary and then its replicas.
func (sh *Shard) Nodes() []*Server { return append([]*Server{sh.Primary}, sh.Replicas...) }

// ID is the cluster node ID of one of the cluster's nodes.
func (c *Cluster) ID(s *Server) string { return c.nodes[s].id }

// startNode starts one cluster node: on a random port, and a random
// cluster bus port (the default, port+10000, may be taken or past 65535).
func (c *Cluster) startNode(args []string) *Server {
	c.t.Helper()
	var lastErr error
	for range 10 {
		port, err := freePort()
		if err != nil {
			c.t.Fatal(err)
		}
		bus, err := freePort()
		if err != nil {
			c.t.Fatal(err)
		}
		s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), port: port, t: c.t,
			args: append(clusterArgs(bus), args...)}
		if lastErr = s.launch(); lastErr == nil {
			c.t.Cleanup(s.Stop)
			c.nodes[s] = &node{bus: bus}
			return s
		}
	}
	c.t.Fatalf("redistest: could not start a cluster node: %v", lastErr)
	return nil
}

// clusterArgs are the arguments of a cluster node. nodes.conf lies in the
// node's own directory, so a restart keeps its identity and slots. The
// rest makes failures and failovers quick and the same every run: a node
// is suspected after 1s without an answer (short, yet long enough that a
// loaded machine does not fail nodes over on its own); a replica may be
// elected however long it was cut off; replicas never move to another
// primary; a full sync starts at once; the log is kept for logOnFailure.
func clusterArgs(bus int) []string {
	return []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-port", strconv.Itoa(bus), "--cluster-announce-ip", "127.0.0.1",
		"--cluster-node-timeout", "1000", "--cluster-replica-validity-factor", "0",
		"--cluster-allow-replica-migration", "no", "--repl-diskless-sync-delay", "0",
		"--logfile", "redis.log", "--loglevel", "notice"}
}

// logOnFailure logs the end of every node's log when the test failed.
func (c *Cluster) logOnFailure() {
	if !c.t.Failed() {
		return
	}
	for s := range c.nodes {
		log, err := os.ReadFile(filepath.Join(s.dir, "redis.log"))
		if err != nil {
			c.t.Logf("redistest: %s: %v", s.Addr, err)
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(log)), "\n")
		c.t.Logf("redistest: the last lines of %s's log:\n%s", s.Addr, strings.Join(lines[max(0, len(lines)-40):], "\n"))
	}
}
