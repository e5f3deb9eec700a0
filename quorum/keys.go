package quorum

// Every key and channel the agent uses on a master, with P the key prefix
// (Config.KeyPrefix). A name's keys all share the hash tag {name}, so that
// a script's keys are in one slot of a master that is a Redis Cluster:
//
//	P{name}            set of holder ids that may hold the name
//	P{name}:h:HOLDER   one per holder: a hash of its fence, who-info (agent, pid,
//	                   uid, owner, since), and the fields of its kind that are
//	                   not their defaults (mode when shared, limit and slot for
//	                   a semaphore, value: see lua/record.lua); PX = its lease
//	P{name}:h:HOLDER!  a revoked hold's record, and HOLDER! its set member (see lua/revoke.lua)
//	P{name}:fence      the fence counter; never expires
//	P{name}:released:HOLDER  tombstone of a release that found no key (see lua/release.lua)
//	P{name}:q          the name's queue (fair=true, and writers that readers
//	                   block): a sorted set of entries "ID|mode|limit" scored
//	                   by their settled ticket; ties order by ID (an
//	                   entry is written only once its ticket is settled)
//	P{name}:qd         each entry's heartbeat deadline (ms, master clock)
//	P{name}:qseq       the ticket counter; never expires
//	P{name}:qx:ENTRY   tombstone of an entry that left (see lua/dequeue.lua)
//	P{name}:obs        set while some agent observes the name (OBSERVE); PX =
//	                   a lease, renewed by that agent: a grant then says so
//	                   on the name's channel (see leaderMessage)
//	P{name}:w, :wd     each agent's waiting record and its deadline (see waiting.go)
//	Pepoch             the master's epoch marker: a hash {epoch, until, floor,
//	                   run, settings, how} (see lua/gate.lua; how is "plant" on a
//	                   master that had none, "restart" over another server's,
//	                   "change" by the settings command, none by bootstrap)
//	Pepoch{TAG}        on a master that is a Redis Cluster, the marker of the
//	                   slot of hash tag TAG (see slots.go)
//
// and the channels
//
//	P{name}:released   the name's channel: releases, grants of an observed
//	                   name, caches, wants (see watch.go)
//	Prevocations       revocations, which every agent hears (see WatchRevocations)
//
// The set expires no sooner than any member's holder key, so a live holder
// key is always listed. A listed member whose holder key is gone is stale and
// is dropped by the next acquire.
//
// Scripts touch the epoch marker beside a name's keys, so on a master that
// is a Redis Cluster the marker is one per hash slot (see slots.go), and a
// call's generic marker key is that of its name's slot.
//
// The functions below build every one of them; nothing else in the agent
// does. The scripts derive three from the keys they are given, in Lua: a
// holder key from the set key (renew.lua), a tombstone from the set key
// (acquire, repair, release, end, revoke), and a revoked record from a
// holder key (release, end, revoke); keys_test.go checks that they write
// the same suffixes as these.
const (
	holderInfix     = ":h:"
	tombstoneInfix  = ":released:"
	revokedSuffix   = "!"
	channelSuffix   = ":released"
	fenceSuffix     = ":fence"
	queueSuffix     = ":q"
	deadlinesSuffix = ":qd"
	ticketSuffix    = ":qseq"
	leftInfix       = ":qx:"
	observedSuffix  = ":obs"
	waitingSuffix   = ":w"
	waitingDLSuffix = ":wd"
	markerName      = "epoch"
	revocationsName = "revocations"
)

// setKey is name's set of holders; every other key of the name starts with it.
func (c *Cluster) setKey(name string) string { return c.cfg.KeyPrefix + "{" + name + "}" }

// holderKey is holderPrefix(name) + holder, made in one allocation: a
// renewal makes one per hold.
func (c *Cluster) holderKey(name, holder string) string {
	return c.cfg.KeyPrefix + "{" + name + "}" + holderInfix + holder
}

func (c *Cluster) holderPrefix(name string) string { return c.setKey(name) + holderInfix }

// revokedKey is the record of holder's hold of name once revoked.
func (c *Cluster) revokedKey(name, holder string) string {
	return c.holderKey(name, holder) + revokedSuffix
}

func (c *Cluster) channel(name string) string  { return c.setKey(name) + channelSuffix }
func (c *Cluster) fenceKey(name string) string { return c.setKey(name) + fenceSuffix }

func (c *Cluster) queueKey(name string) string     { return c.setKey(name) + queueSuffix }
func (c *Cluster) deadlinesKey(name string) string { return c.setKey(name) + deadlinesSuffix }
func (c *Cluster) ticketKey(name string) string    { return c.setKey(name) + ticketSuffix }
func (c *Cluster) leftPrefix(name string) string   { return c.setKey(name) + leftInfix }

func (c *Cluster) observedKey(name string) string { return c.setKey(name) + observedSuffix }

func (c *Cluster) waitingKey(name string) string          { return c.setKey(name) + waitingSuffix }
func (c *Cluster) waitingDeadlinesKey(name string) string { return c.setKey(name) + waitingDLSuffix }

// markerKey is the master's epoch marker (on a master that is a Redis
// Cluster, a call's generic marker: see callSlot).
func (c *Cluster) markerKey() string { return c.cfg.KeyPrefix + markerName }

// slotMarkerKey is the key of slot's epoch marker on a master that is a
// Redis Cluster.
func (c *Cluster) slotMarkerKey(slot int) string {
	return c.cfg.KeyPrefix + markerName + "{" + slotTags()[slot] + "}"
}

// revocations is the channel of revocations: every agent listens to it
// (see WatchRevocations), and learns of a hold of its own that REVOKE ended
// without waiting for its next renewal.
func (c *Cluster) revocations() string { return c.cfg.KeyPrefix + revocationsName }
