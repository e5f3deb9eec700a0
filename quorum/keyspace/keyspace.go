// Package keyspace names every key and channel the agent uses on a master,
// with P the key prefix (quorum.Config.KeyPrefix). A name's keys all share the hash tag {name}, so that
// a script's keys are in one slot of a master that is a Redis Cluster:
//
//	P{name}            set of holder ids that may hold the name
//	P{name}:h:HOLDER   one per holder: a hash of its fence, who-info (agent, pid,
//	                   uid, owner, since), and the fields of its kind that are
//	                   not their defaults (mode when shared, limit and slot for
//	                   a semaphore, value: see scripts/lua/record.lua); PX = its lease
//	P{name}:h:HOLDER!  a revoked hold's record, and HOLDER! its set member (see scripts/lua/revoke.lua)
//	P{name}:fence      the fence counter; never expires
//	P{name}:released:HOLDER  tombstone of a release that found no key (see scripts/lua/release.lua)
//	P{name}:q          the name's queue (fair=true, and writers that readers
//	                   block): a sorted set of entries "ID|mode|limit" scored
//	                   by their settled ticket; ties order by ID (an
//	                   entry is written only once its ticket is settled)
//	P{name}:qd         each entry's heartbeat deadline (ms, master clock)
//	P{name}:qseq       the ticket counter; never expires
//	P{name}:qx:ENTRY   tombstone of an entry that left (see scripts/lua/dequeue.lua)
//	P{name}:obs        set while some agent observes the name (OBSERVE); PX =
//	                   a lease, renewed by that agent: a grant then says so
//	                   on the name's channel (see leaderMessage)
//	P{name}:w, :wd     each agent's waiting record and its deadline (see quorum/waiters.go)
//	Pepoch             the master's epoch marker: a hash {epoch, until, floor,
//	                   run, settings, how} (see scripts/lua/gate.lua; how is "plant" on a
//	                   master that had none, "restart" over another server's,
//	                   "change" by the settings command, none by bootstrap)
//	Pepoch{TAG}        on a master that is a Redis Cluster, the marker of the
//	                   slot of hash tag TAG (see package hashslot)
//
// and the channels
//
//	P{name}:released   the name's channel: releases, grants of an observed
//	                   name, caches, wants (see quorum/watch.go)
//	Prevocations       revocations, which every agent hears (see WatchRevocations)
//
// The set expires no sooner than any member's holder key, so a live holder
// key is always listed. A listed member whose holder key is gone is stale and
// is dropped by the next acquire.
//
// Scripts touch the epoch marker beside a name's keys, so on a master that
// is a Redis Cluster the marker is one per hash slot (see hashslot), and a
// call's generic marker key is that of its name's slot.
//
// The methods of Prefix build every one of them; nothing else in the agent
// does. The scripts derive three from the keys they are given, in Lua: a
// holder key from the set key (renew.lua), a tombstone from the set key
// (acquire, repair, release, end, revoke), and a revoked record from a
// holder key (release, end, revoke); keyspace_test.go checks that they write
// the same suffixes as these.
package keyspace

import "github.com/lock-agent/lock-agent/quorum/hashslot"

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

// Prefix is the key prefix P (quorum.Config.KeyPrefix); its methods name
// the keys and channels under it.
type Prefix string

// Set is name's set of holders; every other key of the name starts with it.
func (p Prefix) Set(name string) string { return string(p) + "{" + name + "}" }

// Holder is HolderPrefix(name) + holder, made in one allocation: a
// renewal makes one per hold.
func (p Prefix) Holder(name, holder string) string {
	return string(p) + "{" + name + "}" + holderInfix + holder
}

func (p Prefix) HolderPrefix(name string) string { return p.Set(name) + holderInfix }

// Revoked is the record of holder's hold of name once revoked.
func (p Prefix) Revoked(name, holder string) string {
	return p.Holder(name, holder) + revokedSuffix
}

func (p Prefix) Channel(name string) string { return p.Set(name) + channelSuffix }
func (p Prefix) Fence(name string) string   { return p.Set(name) + fenceSuffix }

func (p Prefix) Queue(name string) string      { return p.Set(name) + queueSuffix }
func (p Prefix) Deadlines(name string) string  { return p.Set(name) + deadlinesSuffix }
func (p Prefix) Ticket(name string) string     { return p.Set(name) + ticketSuffix }
func (p Prefix) LeftPrefix(name string) string { return p.Set(name) + leftInfix }

func (p Prefix) Observed(name string) string { return p.Set(name) + observedSuffix }

func (p Prefix) Waiting(name string) string          { return p.Set(name) + waitingSuffix }
func (p Prefix) WaitingDeadlines(name string) string { return p.Set(name) + waitingDLSuffix }

// Marker is the master's epoch marker (on a master that is a Redis
// Cluster, a call's generic marker: see CallSlot).
func (p Prefix) Marker() string { return string(p) + markerName }

// SlotMarker is the key of slot's epoch marker on a master that is a
// Redis Cluster.
func (p Prefix) SlotMarker(slot int) string {
	return string(p) + markerName + "{" + hashslot.Tag(slot) + "}"
}

// Revocations is the channel of revocations: every agent listens to it
// (see quorum's WatchRevocations), and learns of a hold of its own that REVOKE ended
// without waiting for its next renewal.
func (p Prefix) Revocations() string { return string(p) + revocationsName }

// CallSlot is the slot of a call's keys on a master that is a Redis
// Cluster (they share one; the generic marker key aside), and keys with
// the generic marker key replaced by that slot's marker. A call of slot
// markers alone is the slot of its first; a call of the generic marker
// alone has no slot (-1): no script may run so on a cluster master.
func (p Prefix) CallSlot(keys []string) (slot int, out []string) {
	generic := p.Marker()
	marker := -1
	slot = -1
	for i, k := range keys {
		switch {
		case k == generic:
			marker = i
		case slot < 0:
			slot = hashslot.Of(k)
		}
	}
	if slot < 0 || marker < 0 {
		return slot, keys
	}
	out = make([]string, len(keys))
	copy(out, keys)
	out[marker] = p.SlotMarker(slot)
	return slot, out
}
