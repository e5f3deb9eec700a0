package model

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"slices"
	"time"

	"github.com/lock-agent/lock-agent/quorum/rules"
)

// ms is a model duration in ms as a time.Duration.
func ms(d int64) time.Duration { return time.Duration(d) * time.Millisecond }

// masters is how many masters the world has.
const masters = 3

// phase is where a client is in its life.
type phase uint8

const (
	idle      phase = iota // holds nothing; may start an attempt if it has one left
	acquiring              // its acquire round's answers come in
	settling               // won: the fence write-back must land on enough masters first
	holding                // granted: it believes it holds the name until its deadline
	done                   // no attempt left, or its agent crashed
)

// answer is a master's answer to a client's round, as the agent counts it.
type answer uint8

const (
	none    answer = iota // not asked in this round
	pending               // asked, no answer yet
	yes                   // granted (acquire), renewed (renew), written (write-back)
	refused               // busy or conflict (acquire), gone (renew)
	failed                // an error, a quarantine refusal, or no answer in time
)

// round is a client's round in flight: its acquire, fence write-back or
// renewal.
type round struct {
	seq     int   // numbers the client's rounds: a message names its round
	start   int64 // when it was sent (model ms): validity counts from here
	answers [masters]answer
	fences  [masters]int64 // an acquire's granted fences (0: none)
	slots   [masters]int   // and the slots granted with them (a semaphore's; 0 for a lock)
	atFence int            // a write-back's masters at the fence
}

// client is one process of an agent that asks for the name.
type client struct {
	phase    phase
	attempts int    // acquire attempts started
	holder   string // the current attempt's holder id
	round    round
	renewing bool  // a renewal round is in flight (holding)
	grantSeq int   // the round that won the current grant (late answers raise the fence)
	busyOn   uint8 // the masters that answered "held" to that round (a bit each)
	fence    int64 // the grant's fence (or, after a hand-over, the fence it handed on)
	// grantFence is the fence the masters granted the hold, and
	// blockEnd the last of the block its grant reserved.
	grantFence, blockEnd int64
	slot                 int   // the grant's slot (a semaphore's; 0 for a lock)
	start                int64 // the winning acquire's start
	deadline             int64 // holding: when its validity ends (it is told LOST then)
	renewAt              int64 // holding: when the watchdog next renews
}

// kind is what a message asks of a master.
type kind uint8

const (
	acquireCall kind = iota
	renewCall
	writeBackCall // a won round's fence write-back that the grant waits for
	raiseCall     // a fence write-back in the background
	releaseCall
	repairCall // a hold re-created on a master that lost it, after a renewal a majority made
)

var kindNames = [...]string{"acquire", "renew", "write-back", "raise", "release", "repair"}

// message is a script call on its way to a master. It is built into the
// script call only when delivered, by the sending agent's own Cluster.
type message struct {
	master int
	kind   kind
	agent  int
	client int
	seq    int    // the round it answers (round messages)
	holder string // the attempt's holder id
	fence  int64  // write-back, raise, repair: the fence to write
	slot   int    // repair: the hold's slot
	// mayPlant is, for a call that runs the gate (acquire, renew, repair),
	// whether its agent might plant a marker when it sent it (see
	// rules.MayPlant): the agent builds the gate argument then.
	mayPlant bool
}

// state is one state of the world.
type state struct {
	now     int64 // model ms
	masters [masters]*keyspace
	clients []client // agent a's clients first, then the next agent's
	crashed []bool   // per agent
	// views is, per agent, what its probes last saw of each master's
	// marker: what it decides to plant and re-plant by.
	views []markerViews
	net   []message
	// skew is how far each master's clock is ahead of the model's (ms):
	// its TIME, and the model time at which its keys expire.
	skew    [masters]int64
	skews   int // clock jumps so far
	wipes   int // master restarts and flushes so far
	crashes int // agent crashes so far
	// lastFence is, per slot (0 for a lock), the last grant's fence:
	// grants of one slot never overlap, so their fences must grow; grants
	// of two slots may, and may tie or come in any order (docs/protocol.md).
	lastFence [masters + 1]int64
	// violation is an invariant the event into this state broke (the
	// fence order is checked at the grant); not part of the digest.
	violation string
}

// markerViews are one agent's views of the masters' markers.
type markerViews [masters]rules.MarkerView

// decisions are what an agent with views v decides, as a Cluster does:
// whether it may plant a marker, and whether its probe re-plants one that
// records other settings.
func (v markerViews) decisions() (mayPlant, replant bool) {
	ours, others, probed := rules.MarkerCounts(v[:])
	quorumSize := rules.Majority(masters)
	return rules.MayPlant(ours, others, probed, quorumSize), rules.Replant(ours, quorumSize)
}

// granted checks a grant of fence on slot against the slot's last grant
// (how is what the trace says of it), and records it.
func (s *state) granted(fence int64, slot int, how string) {
	if fence <= s.lastFence[slot] && s.violation == "" {
		s.violation = fmt.Sprintf("fence %d %s is not above the last grant's %d (slot %d)", fence, how, s.lastFence[slot], slot)
	}
	s.lastFence[slot] = max(s.lastFence[slot], fence)
}

// clock is master i's clock: the model's time plus its skew.
func (s *state) clock(i int) int64 { return s.now + s.skew[i] }

func (s *state) clone() *state {
	c := *s
	c.clients = slices.Clone(s.clients)
	c.crashed = slices.Clone(s.crashed)
	c.views = slices.Clone(s.views)
	c.net = slices.Clone(s.net)
	return &c
}

// send puts messages on their way, keeping the net in canonical order.
func (s *state) send(ms ...message) {
	s.net = append(s.net, ms...)
	slices.SortFunc(s.net, compareMessages)
}

func compareMessages(a, b message) int {
	for _, d := range []int{a.master - b.master, int(a.kind) - int(b.kind), a.agent - b.agent, a.client - b.client, a.seq - b.seq} {
		if d != 0 {
			return d
		}
	}
	if a.holder != b.holder {
		if a.holder < b.holder {
			return -1
		}
		return 1
	}
	if a.fence != b.fence {
		return int(a.fence - b.fence)
	}
	if a.slot != b.slot {
		return a.slot - b.slot
	}
	return int(boolByte(a.mayPlant)) - int(boolByte(b.mayPlant))
}

// digest identifies s up to the masters' names: two states that differ
// only in which master is which behave alike (the masters are
// interchangeable: every round goes to all of them, and its outcome counts
// answers, not names), so the digest is that of the least of s's encodings
// under every order of the masters. It is two 64-bit hashes of that
// encoding (a collision among a few million states is below one in a
// billion).
func (s *state) digest() [16]byte {
	var least []byte
	for _, p := range masterOrders {
		if b := s.encode(p); least == nil || bytes.Compare(b, least) < 0 {
			least = b
		}
	}
	var out [16]byte
	binary.LittleEndian.PutUint64(out[:8], maphash.Bytes(seedA, least))
	binary.LittleEndian.PutUint64(out[8:], maphash.Bytes(seedB, least))
	return out
}

// masterOrders are the orders of the masters: order[j] is the master that
// comes j-th.
var masterOrders = [][masters]int{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}}

// encode is s as bytes, with the masters taken in order.
func (s *state) encode(order [masters]int) []byte {
	var rank [masters]int // where each master comes
	for j, m := range order {
		rank[m] = j
	}
	b := make([]byte, 0, 512)
	u := func(v int64) { b = binary.LittleEndian.AppendUint64(b, uint64(v)) }
	u(s.now)
	u(int64(s.wipes)<<32 | int64(s.crashes)<<16 | int64(s.skews))
	for _, m := range order {
		u(s.skew[m])
	}
	for _, f := range s.lastFence {
		u(f)
	}
	for _, m := range order {
		b = append(b, s.masters[m].digest[:]...)
	}
	for _, c := range s.clients {
		b = append(b, byte(c.phase), byte(c.attempts), byte(c.round.seq), byte(c.round.atFence), boolByte(c.renewing), byte(c.grantSeq),
			permuteBits(c.busyOn, order))
		for _, m := range order {
			b = append(b, byte(c.round.answers[m]), byte(c.round.slots[m]))
			u(c.round.fences[m])
		}
		u(c.round.start)
		u(c.fence)
		u(c.grantFence)
		u(c.blockEnd)
		u(int64(c.slot))
		u(c.start)
		u(c.deadline)
		u(c.renewAt)
		b = append(b, c.holder...)
		b = append(b, 0)
	}
	for _, crashed := range s.crashed {
		b = append(b, boolByte(crashed))
	}
	for _, v := range s.views {
		for _, m := range order {
			b = append(b, byte(v[m]))
		}
	}
	net := slices.Clone(s.net)
	for i := range net {
		net[i].master = rank[net[i].master]
	}
	slices.SortFunc(net, compareMessages)
	for _, m := range net {
		b = append(b, byte(m.master), byte(m.kind), byte(m.agent), byte(m.client), byte(m.seq), byte(m.slot), boolByte(m.mayPlant))
		u(m.fence)
		b = append(b, m.holder...)
		b = append(b, 0)
	}
	return b
}

var seedA, seedB = maphash.MakeSeed(), maphash.MakeSeed()

// permuteBits is mask, a bit per master, with the masters taken in order.
func permuteBits(mask uint8, order [masters]int) byte {
	var out byte
	for j, m := range order {
		if mask&(1<<m) != 0 {
			out |= 1 << j
		}
	}
	return out
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}
