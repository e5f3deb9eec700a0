package quorum

import (
	"cmp"
	"slices"
	"time"
)

// clockSlack is the fixed part of the drift allowance: RedLock's 2 ms for the
// granularity of expiry on the masters.
const clockSlack = 2 * time.Millisecond

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

// Validity is how long a lease is known to hold after the operation that set
// it started: lease − elapsed − lease×driftFactor − 2 ms. It is negative when
// the lease is already unsafe to rely on.
func Validity(lease, elapsed time.Duration, driftFactor float64) time.Duration {
	drift := time.Duration(float64(lease)*driftFactor) + clockSlack
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
// timeouts ago.
func Trusted(doubted bool, silent, timeout time.Duration) bool {
	return !doubted && silent < 3*timeout
}
