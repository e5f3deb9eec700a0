package redistest

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestClusterStarts: three shards with a replica each cover every slot
// once; each primary takes writes for its own slots and sends the others
// to the owner; and the settle check sees a slot map that differs.
func TestClusterStarts(t *testing.T) {
	began := time.Now()
	c := StartCluster(t, ClusterOptions{Shards: 3, Replicas: 1})
	t.Logf("the cluster settled %v after it began", time.Since(began))
	if len(c.Seeds()) != 3 || len(c.Shards()) != 3 {
		t.Fatalf("seeds %v, %d shards", c.Seeds(), len(c.Shards()))
	}
	covered := 0
	for _, sh := range c.Shards() {
		if len(sh.Replicas) != 1 || len(sh.Slots()) != 1 {
			t.Fatalf("shard of %s: replicas %v, slots %v", sh.Primary.Addr, sh.Replicas, sh.Slots())
		}
		covered += sh.Slots()[0].Last - sh.Slots()[0].First + 1
	}
	if covered != SlotCount {
		t.Fatalf("the shards cover %d slots", covered)
	}
	for _, key := range []string{"a", "b", "c", "{user1}:x"} {
		owner := c.Owner(SlotOf(key))
		if _, err := owner.Primary.Do("SET", key, "v"); err != nil {
			t.Fatalf("SET %s on its owner %s: %v", key, owner.Primary.Addr, err)
		}
		for _, sh := range c.Shards() {
			want := "MOVED " + strconv.Itoa(SlotOf(key)) + " " + owner.Primary.Addr
			if _, err := sh.Primary.Do("GET", key); sh != owner && (err == nil || !strings.Contains(err.Error(), want)) {
				t.Fatalf("GET %s on %s: %v, want %s", key, sh.Primary.Addr, err, want)
			}
		}
	}
	first, second := c.Shards()[0], c.Shards()[1]
	c.owner[0] = second
	if problem := c.unsettled(); !strings.Contains(problem, "sees") {
		t.Fatalf("with slot 0 expected on the wrong shard, the check says %q", problem)
	}
	c.owner[0] = first
	if problem := c.unsettled(); problem != "" {
		t.Fatal(problem)
	}
}

// TestSlotOf: the harness's slots are the server's (CLUSTER KEYSLOT),
// hash tags included.
func TestSlotOf(t *testing.T) {
	if got := crc16("123456789"); got != 0x31C3 {
		t.Fatalf("crc16 of the check string is %#x, want 0x31c3", got)
	}
	c := StartCluster(t, ClusterOptions{Shards: 1})
	node := c.Shards()[0].Primary
	keys := []string{"", "a", "foo", "123456789", "{user1000}.following", "{user1000}.followers",
		"foo{}{bar}", "foo{{bar}}zap", "foo{bar}{zap}", "{}", "{", "}{a}", "lock-agent:{name}:fence", "P{x}:released"}
	for _, key := range keys {
		want := c.mustDo(node, "CLUSTER", "KEYSLOT", key)
		if got := strconv.Itoa(SlotOf(key)); got != want {
			t.Errorf("SlotOf(%q) = %s, CLUSTER KEYSLOT says %s", key, got, want)
		}
	}
}

// TestClusterRestartEmpty: the restarted primary keeps its node ID and
// slots and serves them again, without the data, and so does its replica.
func TestClusterRestartEmpty(t *testing.T) {
	c := StartCluster(t, ClusterOptions{Shards: 3, Replicas: 1})
	sh := c.Owner(SlotOf("k"))
	id := c.ID(sh.Primary)
	c.mustDo(sh.Primary, "SET", "k", "v")
	c.awaitAcks(sh)
	if n := sh.Replicas[0].Keys("*"); n != 1 {
		t.Fatalf("the replica has %d keys before the restart, want k", n)
	}
	began := time.Now()
	c.RestartEmpty(sh)
	t.Logf("the shard restarted empty and the cluster settled in %v", time.Since(began))
	if got := c.mustDo(sh.Primary, "CLUSTER", "MYID"); got != id {
		t.Fatalf("the restarted primary is %s, was %s", got, id)
	}
	for _, s := range sh.Nodes() {
		if n := s.Keys("*"); n != 0 {
			t.Fatalf("%s has %d keys after the restart", s.Addr, n)
		}
	}
	if _, err := sh.Primary.Do("SET", "k", "again"); err != nil {
		t.Fatalf("the restarted primary refuses a write in its slot: %v", err)
	}
}

// TestClusterFailover: the replica becomes the primary with the data, the
// old primary its replica, and the old primary sends writes to the new.
func TestClusterFailover(t *testing.T) {
	c := StartCluster(t, ClusterOptions{Shards: 3, Replicas: 1})
	sh := c.Owner(SlotOf("k"))
	old, replica := sh.Primary, sh.Replicas[0]
	c.mustDo(old, "SET", "k", "v")
	began := time.Now()
	c.Failover(sh)
	t.Logf("the failover settled in %v", time.Since(began))
	if sh.Primary != replica || len(sh.Replicas) != 1 || sh.Replicas[0] != old {
		t.Fatalf("after the failover the shard is %s with %v", sh.Primary.Addr, sh.Replicas)
	}
	if v := c.mustDo(sh.Primary, "GET", "k"); v != "v" {
		t.Fatalf("the new primary has k=%q", v)
	}
	if _, err := old.Do("SET", "k", "w"); err == nil || !strings.Contains(err.Error(), "MOVED") {
		t.Fatalf("the old primary answers a write with %v, want MOVED", err)
	}
}

// TestClusterKillPrimary: the cluster elects the replica of a killed
// primary, with the data; the killed node, started again, rejoins as
// the new primary's replica and syncs from it.
func TestClusterKillPrimary(t *testing.T) {
	c := StartCluster(t, ClusterOptions{Shards: 3, Replicas: 1})
	sh := c.Owner(SlotOf("k"))
	replica := sh.Replicas[0]
	c.mustDo(sh.Primary, "SET", "k", "v")
	c.awaitAcks(sh)
	began := time.Now()
	killed := c.KillPrimary(sh)
	t.Logf("the replica was elected and the cluster settled %v after the kill", time.Since(began))
	if sh.Primary != replica || len(sh.Replicas) != 0 {
		t.Fatalf("after the kill the shard is %s with %v", sh.Primary.Addr, sh.Replicas)
	}
	if v := c.mustDo(sh.Primary, "GET", "k"); v != "v" {
		t.Fatalf("the elected replica has k=%q", v)
	}
	began = time.Now()
	c.Rejoin(sh, killed)
	t.Logf("the killed node rejoined in %v", time.Since(began))
	if n := killed.Keys("*"); n != 1 {
		t.Fatalf("the rejoined node has %d keys, want k", n)
	}
}

// TestClusterMigrateSlot: half-way, the moved keys are on the target and
// the source sends a client there by ASK; at the end every key is on the
// target and the source sends clients there by MOVED.
func TestClusterMigrateSlot(t *testing.T) {
	c := StartCluster(t, ClusterOptions{Shards: 3, Replicas: 1})
	slot := SlotOf("{m}")
	from := c.Owner(slot)
	to := c.Shards()[0]
	if to == from {
		to = c.Shards()[1]
	}
	for i := range 250 {
		c.mustDo(from.Primary, "SET", "{m}:"+strconv.Itoa(i), "v")
	}
	m := c.BeginMigration(slot, to)
	if n := m.MoveKeys(100); n != 100 {
		t.Fatalf("MoveKeys(100) moved %d", n)
	}
	countIn := func(s *Server) string { return c.mustDo(s, "CLUSTER", "COUNTKEYSINSLOT", strconv.Itoa(slot)) }
	if src, dst := countIn(from.Primary), countIn(to.Primary); src != "150" || dst != "100" {
		t.Fatalf("half-way the source has %s keys of the slot and the target %s, want 150 and 100", src, dst)
	}
	moved, err := to.Primary.Array("CLUSTER", "GETKEYSINSLOT", strconv.Itoa(slot), "1")
	if err != nil || len(moved) != 1 {
		t.Fatalf("GETKEYSINSLOT on the target: %q %v", moved, err)
	}
	ask := "ASK " + strconv.Itoa(slot) + " " + to.Primary.Addr
	if _, err := from.Primary.Do("GET", moved[0]); err == nil || !strings.Contains(err.Error(), ask) {
		t.Fatalf("GET of a moved key on the source: %v, want %s", err, ask)
	}
	m.Finish()
	if src, dst := countIn(from.Primary), countIn(to.Primary); src != "0" || dst != "250" {
		t.Fatalf("at the end the source has %s keys of the slot and the target %s, want 0 and 250", src, dst)
	}
	if c.Owner(slot) != to || len(from.Slots()) != 2 {
		t.Fatalf("slot %d is on %s; the source has %v", slot, c.Owner(slot).Primary.Addr, from.Slots())
	}
	if _, err := from.Primary.Do("GET", "{m}:0"); err == nil || !strings.Contains(err.Error(), "MOVED "+strconv.Itoa(slot)+" "+to.Primary.Addr) {
		t.Fatalf("GET on the source after the migration: %v, want MOVED to the target", err)
	}
}
