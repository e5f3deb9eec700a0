package redistest

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"
)

// clusterTimeout bounds every wait for the cluster to settle. A failover
// by election takes about 3s with a node timeout of 1s; a machine loaded by
// other tests can take several times that.
const clusterTimeout = 30 * time.Second

// create makes the started nodes one cluster by hand: each primary gets a
// distinct config epoch and its slots (ADDSLOTSRANGE), every node meets
// the first primary (MEET; gossip introduces the rest), and each replica
// follows its primary (REPLICATE). `redis-cli --cluster create` does the
// same, but picks which node replicates which by its own rule and polls
// the cluster once a second; by hand the shards are the ones the harness
// planned, and the wait ends as soon as the cluster has settled.
func (c *Cluster) create() {
	c.t.Helper()
	for s, n := range c.nodes {
		n.id = c.mustDo(s, "CLUSTER", "MYID")
	}
	for i, sh := range c.shards {
		// Distinct epochs from the start: no collision for the nodes to resolve.
		c.mustDo(sh.Primary, "CLUSTER", "SET-CONFIG-EPOCH", strconv.Itoa(i+1))
		for _, r := range sh.Slots() {
			c.mustDo(sh.Primary, "CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(r.First), strconv.Itoa(r.Last))
		}
	}
	seed := c.shards[0].Primary
	for s := range c.nodes {
		if s != seed {
			c.mustDo(s, "CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(seed.port), strconv.Itoa(c.nodes[seed].bus))
		}
	}
	for _, sh := range c.shards {
		for _, r := range sh.Replicas {
			c.await("a replica learns of its primary", func() string {
				_, err := r.Do("CLUSTER", "REPLICATE", c.ID(sh.Primary)) // "Unknown node" until gossip brings it
				return errString(err)
			})
		}
	}
	c.settle("the cluster was created")
}

// settle waits until every node of every shard says cluster_state:ok and
// sees the cluster as the harness expects it, every replica is in sync
// with its primary, and every primary has heard an acknowledgement from
// each of its replicas (see awaitAcks).
func (c *Cluster) settle(after string) {
	c.t.Helper()
	c.await(after, c.unsettled)
	for _, sh := range c.shards {
		if len(sh.Replicas) > 0 && len(sh.Slots()) > 0 { // a shard with no slots has no key to write
			c.awaitAcks(sh)
		}
	}
}

// await polls unsettled, which says what is not yet as wanted ("" once
// it is), until it is, and fails the test with the last answer after
// clusterTimeout.
func (c *Cluster) await(what string, unsettled func() string) {
	c.t.Helper()
	deadline := time.Now().Add(clusterTimeout)
	for {
		problem := unsettled()
		if problem == "" {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("redistest: cluster: %s: not settled after %v: %s", what, clusterTimeout, problem)
		}
		time.Sleep(20 * time.Millisecond) // polling: a cluster has no way to wait
	}
}

// unsettled says the first way the cluster is not yet as expected, or "".
func (c *Cluster) unsettled() string {
	want := c.expectedView()
	for _, sh := range c.shards {
		for _, s := range sh.Nodes() {
			info, err := s.Array("CLUSTER", "INFO")
			if err != nil || len(info) != 1 {
				return fmt.Sprintf("%s: CLUSTER INFO: %v", s.Addr, err)
			}
			if state := InfoField(info[0], "cluster_state"); state != "ok" {
				return fmt.Sprintf("%s says cluster_state:%s", s.Addr, state)
			}
			if got, err := viewOf(s); err != nil || got != want {
				return fmt.Sprintf("%s sees\n%s\nwant\n%s\n(%v)", s.Addr, got, want, err)
			}
		}
		for _, r := range sh.Replicas {
			if problem := replicaProblem(r, sh.Primary); problem != "" {
				return problem
			}
		}
	}
	return ""
}

// expectedView is the cluster as the harness expects every node to see
// it, in the form of parseView.
func (c *Cluster) expectedView() string {
	var lines []string
	for _, sh := range c.shards {
		var slots []string
		for _, r := range sh.Slots() {
			slots = append(slots, r.String())
		}
		lines = append(lines, primaryLine(sh.Primary.Addr, slots))
		for _, r := range sh.Replicas {
			lines = append(lines, "replica "+r.Addr+" of "+sh.Primary.Addr)
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

func primaryLine(addr string, slots []string) string {
	if len(slots) == 0 {
		return "primary " + addr + " no slots"
	}
	return "primary " + addr + " " + strings.Join(slots, ",")
}

// viewOf is the cluster as s sees it, in the form of parseView.
func viewOf(s *Server) (string, error) {
	nodes, err := s.Array("CLUSTER", "NODES")
	if err != nil || len(nodes) != 1 {
		return "", fmt.Errorf("%s: CLUSTER NODES: %q %v", s.Addr, nodes, err)
	}
	return parseView(nodes[0]), nil
}

// parseView turns a CLUSTER NODES reply into sorted lines "primary ADDR
// SLOTS" and "replica ADDR of ADDR", leaving out the nodes this node holds
// failed or suspects, is still meeting, or has no address for: a dead node
// is no part of a settled cluster. Slots being migrated ("[slot->-id]",
// shown only by the nodes involved) are left out too.
func parseView(nodes string) string {
	addrOf := map[string]string{}
	var rows [][]string
	for _, line := range strings.Split(strings.TrimSpace(nodes), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		addrOf[f[0]] = addr
		rows = append(rows, f)
	}
	var lines []string
	for _, f := range rows {
		flags := strings.Split(f[2], ",")
		switch {
		case slices.ContainsFunc(flags, func(s string) bool {
			return s == "fail" || s == "fail?" || s == "handshake" || s == "noaddr"
		}):
		case slices.Contains(flags, "master"):
			slots := slices.DeleteFunc(f[8:], func(s string) bool { return strings.HasPrefix(s, "[") })
			lines = append(lines, primaryLine(addrOf[f[0]], slots))
		default:
			lines = append(lines, "replica "+addrOf[f[0]]+" of "+addrOf[f[3]])
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// replicaProblem says how replica is not yet in sync with primary, or "".
// The replication IDs match only once the replica has synced with the
// primary's current run (a restarted primary has a new one).
func replicaProblem(replica, primary *Server) string {
	r, err := replica.Info("replication")
	if err != nil {
		return replica.Addr + ": " + err.Error()
	}
	p, err := primary.Info("replication")
	if err != nil {
		return primary.Addr + ": " + err.Error()
	}
	_, port, _ := net.SplitHostPort(primary.Addr)
	if InfoField(r, "role") != "slave" || InfoField(r, "master_port") != port ||
		InfoField(r, "master_link_status") != "up" || InfoField(r, "master_replid") != InfoField(p, "master_replid") {
		return fmt.Sprintf("replica %s: role:%s master_port:%s master_link_status:%s master_replid:%s, its primary %s has master_replid:%s",
			replica.Addr, InfoField(r, "role"), InfoField(r, "master_port"), InfoField(r, "master_link_status"),
			InfoField(r, "master_replid"), primary.Addr, InfoField(p, "master_replid"))
	}
	return ""
}

// awaitAcks is Server.awaitAcks for a shard's primary: in cluster mode a
// PUBLISH goes over the cluster bus, not down the replication stream, so
// the write it waits for is an INCR and a DEL of a key in a slot the
// shard owns. A primary with min-replicas-to-write refuses them
// (NOREPLICAS) until its replicas acknowledged once: they are sent again
// until it takes them, within the connection's 15s.
func (c *Cluster) awaitAcks(sh *Shard) {
	c.t.Helper()
	key := c.keyIn(sh)
	conn, err := sh.Primary.dial()
	if err != nil {
		c.t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(15 * time.Second))
	replicas := strconv.Itoa(len(sh.Replicas))
	for _, args := range [][]string{{"INCR", key}, {"DEL", key}} {
		// With min-replicas-to-write set, the primary refuses writes until
		// its replicas' first acknowledgement (up to a second after the
		// sync): that is what this waits for, asked again every 10ms.
		_, err := do(conn, args...)
		for err != nil && strings.HasPrefix(err.Error(), "redis: NOREPLICAS") {
			time.Sleep(10 * time.Millisecond)
			_, err = do(conn, args...)
		}
		if err != nil {
			c.t.Fatalf("redistest: %s: %v", sh.Primary.Addr, err)
		}
	}
	if n, err := do(conn, "WAIT", replicas, "10000"); err != nil || n != replicas {
		c.t.Fatalf("redistest: %s: %s of %s replicas acknowledged a write in 10s (%v)", sh.Primary.Addr, n, replicas, err)
	}
}

// keyIn is a key in a slot that sh owns; sh must own one.
func (c *Cluster) keyIn(sh *Shard) string {
	for i := 0; ; i++ {
		if key := "redistest:sync:" + strconv.Itoa(i); c.owner[SlotOf(key)] == sh {
			return key
		}
	}
}

func (c *Cluster) mustDo(s *Server, args ...string) string {
	c.t.Helper()
	reply, err := s.Do(args...)
	if err != nil {
		c.t.Fatalf("redistest: %s: %s: %v", s.Addr, strings.Join(args, " "), err)
	}
	return reply
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
