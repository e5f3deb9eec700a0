package redistest

import (
	"strconv"
	"strings"
)

// Migration is one slot moving, with its keys, from one shard to another,
// as `redis-cli --cluster reshard` moves it; between BeginMigration and
// Finish the slot is half-migrated: MIGRATING on the source, IMPORTING on
// the target, its keys partly on each.
type Migration struct {
	c        *Cluster
	slot     int
	from, to *Shard
}

// MigrateSlot moves slot with its keys to the shard to, and returns once
// the cluster has settled (see StartCluster).
func (c *Cluster) MigrateSlot(slot int, to *Shard) {
	c.t.Helper()
	c.BeginMigration(slot, to).Finish()
}

// BeginMigration marks slot IMPORTING on the shard to (first, so that a
// client sent there by an ASK finds it importing) and MIGRATING on the
// shard that owns it, and moves no key yet.
func (c *Cluster) BeginMigration(slot int, to *Shard) *Migration {
	c.t.Helper()
	m := &Migration{c: c, slot: slot, from: c.owner[slot], to: to}
	if m.from == to {
		c.t.Fatalf("redistest: cluster: slot %d is already on %s", slot, to.Primary.Addr)
	}
	c.mustDo(to.Primary, "CLUSTER", "SETSLOT", strconv.Itoa(slot), "IMPORTING", c.ID(m.from.Primary))
	c.mustDo(m.from.Primary, "CLUSTER", "SETSLOT", strconv.Itoa(slot), "MIGRATING", c.ID(to.Primary))
	return m
}

// MoveKeys moves up to n of the slot's keys still on the source to the
// target (GETKEYSINSLOT, then one MIGRATE), and returns how many it moved:
// 0 once none is left.
func (m *Migration) MoveKeys(n int) int {
	m.c.t.Helper()
	source, target := m.from.Primary, m.to.Primary
	keys, err := source.Array("CLUSTER", "GETKEYSINSLOT", strconv.Itoa(m.slot), strconv.Itoa(n))
	if err != nil {
		m.c.t.Fatalf("redistest: %s: CLUSTER GETKEYSINSLOT %d: %v", source.Addr, m.slot, err)
	}
	if len(keys) == 0 {
		return 0
	}
	host, port := "127.0.0.1", strconv.Itoa(target.port)
	migrate := append([]string{"MIGRATE", host, port, "", "0", "5000", "KEYS"}, keys...)
	for try := 0; ; try++ {
		_, err := source.Do(migrate...)
		if err == nil {
			return len(keys)
		}
		// A loaded host can delay the cluster bus past the node timeout:
		// the target then says the cluster is down for a moment, and the
		// MIGRATE moved nothing (the source keeps its keys until the
		// target took them). Once every node is ok again, it is sent again.
		if !strings.Contains(err.Error(), "CLUSTERDOWN") || try == 3 {
			m.c.t.Fatalf("redistest: %s: %q: %v", source.Addr, strings.Join(migrate, " "), err)
		}
		m.c.settle("the cluster up again for a MIGRATE")
	}
}

// Finish moves the keys left, then gives the slot to the target: SETSLOT
// NODE on the target first (it bumps its config epoch, so its claim wins),
// then on the source, then on every other primary, as redis-cli does.
// Returns once the cluster has settled.
func (m *Migration) Finish() {
	c := m.c
	c.t.Helper()
	for m.MoveKeys(100) > 0 {
	}
	slot, target := strconv.Itoa(m.slot), c.ID(m.to.Primary)
	c.mustDo(m.to.Primary, "CLUSTER", "SETSLOT", slot, "NODE", target)
	c.mustDo(m.from.Primary, "CLUSTER", "SETSLOT", slot, "NODE", target)
	for _, sh := range c.shards {
		if sh != m.from && sh != m.to {
			c.mustDo(sh.Primary, "CLUSTER", "SETSLOT", slot, "NODE", target)
		}
	}
	c.owner[m.slot] = m.to
	c.settle("slot " + slot + " moved to " + m.to.Primary.Addr)
}
