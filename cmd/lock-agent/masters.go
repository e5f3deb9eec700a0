package main

import (
	"fmt"

	"github.com/lock-agent/lock-agent/quorum/rules"
)

// tolerance says in words that t masters may fail while the agent still
// grants: "tolerates 2 down" (five masters), "no fault tolerance" (one).
func tolerance(t int) string {
	if t > 0 {
		return fmt.Sprintf("tolerates %d down", t)
	}
	return "no fault tolerance"
}

// mastersNote is what validate adds about a count of n masters that buys
// less than it may seem to, or "" for an odd count over one.
func mastersNote(n int) string {
	switch {
	case n-rules.Majority(n) == 0:
		return fmt.Sprintf("note: %s no fault tolerance: with one down every LOCK gets NO_QUORUM and every hold is lost; "+
			"one restarted empty sits out its quarantine (one lease + drift) and nothing is granted meanwhile. "+
			"Three masters tolerate one failure, five two (docs/operations.md, \"How many masters\").", countOf(n, "master gives", "masters give"))
	case n%2 == 0:
		return fmt.Sprintf("note: %d masters tolerate no more failures than %d would (quorum %d): the even one buys nothing but another master to reach.",
			n, n-1, rules.Majority(n))
	}
	return ""
}

// countOf is "one master" or "5 masters": n with the word for one or many.
func countOf(n int, one, many string) string {
	if n == 1 {
		return "one " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
