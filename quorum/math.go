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
