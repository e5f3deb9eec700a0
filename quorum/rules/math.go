// Package rules holds the pure rules of RedLock over N masters, with no I/O:
// majorities, validity, when a round is decided, patience and trust, the fence
// a grant settles on, the tail horizon, and when an agent may plant a marker.
// Each is table-tested in math_test.go.
package rules

import (
	"cmp"
	"slices"
	"time"
)

// ClockSlack is the fixed part of the drift allowance: RedLock's 2 ms for the
// granularity of expiry on the masters.
const ClockSlack = 2 * time.Millisecond

// Majority returns the quorum of n masters: more than half.
func Majority(n int) int { return n/2 + 1 }

// OnMajority returns the most that at least quorum of values reach: the
// quorum-th largest (the zero value when there are fewer).
func OnMajority[T cmp.Ordered](values []T, quorum int) T {
	var zero T
	if len(values) < quorum || quorum < 1 {
		return zero
	}
	sorted := slices.Sorted(slices.Values(values))
	return sorted[len(sorted)-quorum]
}

// FreeOnMajorityIn is how long until a majority of the masters may have a
// name free, from a refused round's answers, counting as free the masters
// that granted (their grants are given back) and those whose answers a
// round decided without them did not read; and the remaining waits the busy
// ones answered (a lease, or a tail). Masters that failed are not counted
// on. When that cannot make a majority free, it is the longest wait (the
// zero value with none): the time by which every holder seen is gone. A
// waiter parks this long unless a release message wakes it first, and the
// end of a lease or a tail sends none: parking longer leaves the name idle.
func FreeOnMajorityIn(waits []time.Duration, free, quorum int) time.Duration {
	if len(waits) == 0 {
		return 0
	}
	sorted := slices.Sorted(slices.Values(waits))
	if need := quorum - free; need >= 1 && need <= len(sorted) {
		return sorted[need-1]
	}
	return sorted[len(sorted)-1]
}

// Validity is how long a lease is known to hold after the operation that set
// it started: lease − elapsed − lease×driftFactor − 2 ms. It is negative when
// the lease is already unsafe to rely on.
func Validity(lease, elapsed time.Duration, driftFactor float64) time.Duration {
	drift := time.Duration(float64(lease)*driftFactor) + ClockSlack
	return lease - elapsed - drift
}

// Outcome is the state of a quorum round as answers come in.
type Outcome int

// The outcomes of a round.
const (
	Pending Outcome = iota // not yet decided: wait for more answers
	Won                    // a majority agreed
	Lost                   // a majority can no longer agree
)

// Decide returns the outcome of a round over n masters of which yes agreed
// and no refused or failed; the rest have not answered. It decides as soon as
// the remaining answers cannot change the result.
func Decide(n, yes, no int) Outcome {
	q := Majority(n)
	switch {
	case yes >= q:
		return Won
	case no > n-q:
		return Lost
	}
	return Pending
}

// DecideSlots is Decide for a claim that must win a majority on one slot
// (a semaphore's; 0 for a lock): granted[s] masters granted slot s, no
// refused or failed, the rest have not answered. It returns Won and the
// slot as soon as one slot has a majority, Lost once no slot can reach one
// (masters granting different slots split the vote), else Pending.
func DecideSlots(n int, granted map[int]int, no int) (Outcome, int) {
	q := Majority(n)
	unanswered := n - no
	best, bestSlot := 0, 0
	for s, g := range granted {
		unanswered -= g
		if g > best || (g == best && s < bestSlot) {
			best, bestSlot = g, s
		}
	}
	switch {
	case best >= q:
		return Won, bestSlot
	case best+unanswered < q:
		return Lost, bestSlot
	}
	return Pending, bestSlot
}

// RTT estimates how long a master takes to answer, as TCP estimates a round
// trip (RFC 6298): a smoothed mean of the answers' times and their smoothed
// mean deviation. Only answers count: a master that does not answer says
// nothing of how long an answer takes (see Cluster.collect).
type RTT struct {
	Mean, Dev time.Duration // both zero before the first answer
}

// Add returns the estimate after one more answer that took d: the first
// sets the mean to d and the deviation to d/2; each later one moves the
// mean 1/8 and the deviation 1/4 of the way.
func (r RTT) Add(d time.Duration) RTT {
	if r == (RTT{}) {
		return RTT{Mean: d, Dev: d / 2}
	}
	diff := r.Mean - d
	if diff < 0 {
		diff = -diff
	}
	return RTT{Mean: r.Mean + (d-r.Mean)/8, Dev: r.Dev + (diff-r.Dev)/4}
}

// Timeout is how long an answer may take before it is late: mean + 4×dev,
// never under floor (master_timeout) nor over ceiling.
func (r RTT) Timeout(floor, ceiling time.Duration) time.Duration {
	return max(floor, min(r.Mean+4*r.Dev, ceiling))
}

// Patience is how long after its start a round still undecided when it has
// waited waited waits for its silent masters: one more step (the masters'
// RTT timeout: see RTT.Timeout), at most to budget, while trusted of them
// are still trusted, or while the round itself was stalled (its timer
// fired late more than half a step: the answers may be in, unread); 0 when
// it waits no more.
//
// A slow master is not a dead one. On a busy host every master answers late
// now and then, past any timeout drawn from its past answers, and a round
// that cut them off there answered NO_QUORUM though every master was up. So
// a round waits for a master the probe does not doubt, and that was heard
// from (any answer, to any call) within a few timeouts: a paused or dead one
// is cut off after those few, as before; a slow one answers on. Validity
// counts from the round's start: a late grant is still a safe one.
func Patience(waited, late, step, budget time.Duration, trusted int) time.Duration {
	if waited >= budget || (trusted == 0 && late <= step/2) {
		return 0
	}
	return min(waited+step, budget)
}

// Trusted says whether a round waits on for a master that has not
// answered it (see Patience): the probe does not doubt it, and it was heard
// from (since, or else as if at, the round's start) less than three of its
// timeouts ago, not counting the time the round stood stalled: its timers
// fired that much late, or the host's tasks waited that long for a CPU.
// Neither a starved agent nor a starved master can be heard, and neither
// is down. So on a host with CPU to spare a paused master costs what it
// did; on one short of CPU, a silent master is waited for until the probe
// doubts it, or to the round's budget.
func Trusted(doubted bool, silent, stalled, timeout time.Duration) bool {
	return !doubted && silent-stalled < 3*timeout
}

// SettleFence is how a won acquire settles its fence (see settleFence):
// fences holds each master's granted fence (> 0 where granted); the
// grant's fence is the highest, atFence how many granted it, and behind
// the granting masters below it, to which it is written back (before the
// grant is answered when atFence is short of a quorum).
func SettleFence(fences []int64) (fence int64, atFence int, behind []int) {
	for _, f := range fences {
		fence = max(fence, f)
	}
	for i, f := range fences {
		switch {
		case f == fence:
			atFence++
		case f > 0:
			behind = append(behind, i)
		}
	}
	return fence, atFence, behind
}

// CheckOutcome decides a CHECK of n masters with quorum q, yes of which
// record the fence and failed of which did not answer: current when yes
// reaches q; not current when the masters that did not answer could not
// make a majority of it with those that did (yes + failed < q); unknown
// (known false) otherwise. It said not current once q masters answered,
// whatever they said: with one of three silent, one yes and one no, the
// silent one may be the second of a current holder's majority (a CHECK
// of a fence just granted, beside the suite's other parts, said false).
func CheckOutcome(n, q, yes, failed int) (current, known bool) {
	switch {
	case yes >= q:
		return true, true
	case yes+failed < q:
		return false, true
	}
	return false, false
}

// ReadQuorum is how many of the masters that answered a read must
// record a thing for the read to show it, when unanswered masters were not
// heard (down, or late: a read is answered at its deadline): a grant is
// answered once a majority (quorum) records it, so a read must not miss
// such a record, and any majority shares at least quorum-unanswered
// masters with the answers. With every master heard, that is quorum.
//
// It errs on the side of showing: with a master unheard, a record that
// only a minority keeps for a moment (a release not yet landed on one
// master) may be shown too.
func ReadQuorum(quorum, unanswered int) int { return max(quorum-unanswered, 1) }

// Horizon is one master's answer to scripts/lua/horizon.lua.
type Horizon struct {
	Answered bool
	Epoch    string
	// Lost says it lost its data and was not settled: it knows nothing of
	// the tails it had.
	Lost bool
	// Left is how long until its tails and its quarantine have ended.
	Left time.Duration
}

// SettleHorizon decides, from the horizons of the other masters of n,
// how long a pending master must sit out (the latest horizon) and whether
// to settle now. A tail stood on a majority q of the n masters, so on at
// least q−1 of the n−1 others (the pending master may have been one); the
// answers of n−q+1 others that did not lose their data meet every such
// set, so one of them reports the tail: complete. When every other master
// answered but fewer kept their data (more than a minority lost it at
// once: a fault a majority does not survive), it settles with what they
// know, incomplete. Else it waits for the next probe.
func SettleHorizon(n int, others []Horizon) (left time.Duration, settle, complete bool) {
	need := min(n-Majority(n)+1, n-1)
	kept, answered := 0, 0
	for _, h := range others {
		if !h.Answered {
			continue
		}
		answered++
		if !h.Lost {
			kept++
			left = max(left, h.Left)
		}
	}
	switch {
	case kept >= need:
		return left, true, true
	case answered == len(others):
		return left, true, false
	}
	return 0, false, false
}

// MarkerView is what an agent's probe last saw of one master's epoch
// marker (see ClassifyMarker).
type MarkerView int32

// The views of a marker.
const (
	ViewUnknown MarkerView = iota // not probed yet
	ViewNone                      // no marker, or one that records no settings
	ViewOurs                      // this agent's settings
	ViewOther                     // other settings
)

// MarkerCounts counts the masters by what their markers record, as an
// agent's probes last saw them (views): its settings, other settings, and
// those probed at all (a master with no marker, or one recording none,
// counts as probed only).
func MarkerCounts(views []MarkerView) (ours, others, probed int) {
	for _, v := range views {
		switch v {
		case ViewOurs:
			ours++
		case ViewOther:
			others++
		}
		if v != ViewUnknown {
			probed++
		}
	}
	return ours, others, probed
}

// MayPlant says whether an agent may plant a marker on a master that has
// none (or record its settings in one that records none), given the counts
// of MarkerCounts and the quorum: when a majority is known to record its
// settings, or when a majority was probed and none records other settings
// (a new cluster, or one older than settings). Otherwise an agent whose
// settings only a minority has could plant its own on a master that lost
// its data: no overlap (that marker refuses the majority's agents), but the
// master would be out of their service.
func MayPlant(ours, others, probed, quorum int) bool {
	return ours >= quorum || (others == 0 && probed >= quorum)
}

// Replant says whether an agent's probe plants anew a marker recording
// other settings (see scripts/lua/marker.lua): when it knows that a majority (quorum)
// records its own, ours being how many its probes saw.
func Replant(ours, quorum int) bool {
	return ours >= quorum
}
