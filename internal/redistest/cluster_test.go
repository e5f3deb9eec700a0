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
