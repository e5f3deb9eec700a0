// Package model checks lock-agent's protocol exhaustively in a small world:
// two agents with one or two clients each (each with its own lease,
// quarantine and recorded settings), asking for one name (a lock or a
// semaphore) on three masters, every interleaving of the events below up to
// a bounded depth, breadth first, with a set of the states seen so that the
// search ends. docs/safety.md says what it found and how to run it deeper.
//
// What is real: the masters run the project's own Lua scripts (acquire,
// renew, repair, release, fence raise, the health probe, and the epoch gate every
// voting script runs first), in an in-process miniredis whose clock (TIME)
// is set to the model's, with each key's PX kept relative to the model's
// clock, so that leases expire and quarantines end as model time advances.
// The scripts' source, KEYS and ARGV are built by the quorum package's own
// functions (quorum/cluster.go, Model*), and the agents decide with the pure
// rules of quorum/rules: DecideSlots for an acquire round, SettleFence for the fence
// write-back, Validity for a grant's and a renewal's deadline, Majority,
// and, from what each agent's probes last saw of each master's marker (part
// of the model's state, not of the never-connected Cluster), MarkerCounts,
// MayPlant and Replant for whether its gate calls may plant a marker and
// its probes re-plant one, and ClassifyMarker (through ModelProbeView) for
// what a probe's reply makes of its view. A gate's refusal (SETTINGS,
// UNPLANTED) is a failed master, as a round counts it.
//
// The events: a client starts an acquire attempt (a new holder id; the
// script sent to every master); each message is delivered (the script runs
// at the current model time and the agent reads the answer) or stays on its
// way while other events happen (delayed; never delivered is lost; a paused
// master is one whose messages wait while time advances); in a Lossy world
// an answer may be lost after its script ran; a round gives up on masters
// that did not answer (the per-master timeout, at any moment); a holder
// releases; its watchdog renews every lease/3 (and re-creates the hold
// where a master lost it, when a majority renewed); an agent's health probe
// of a master runs the gate (planting a marker on a master that has none,
// when the agent may; planting anew one that records other settings, when
// it knows a majority records its own) and updates the agent's view of the
// master; a master restarts
// empty or is flushed; an agent crashes; a master's clock jumps ahead; a
// holder's agent hands the name to another of its clients with the next
// fence of the grant's block (lock cohorting); time advances to the next instant at which
// something is due (a validity deadline, a renewal, a key's expiry, a
// quarantine's end), with the keys whose PX ran out expired and the holds
// whose validity ended told LOST (and given back).
//
// The invariants, checked in every state: no two clients believe they hold
// a lock at once (a client believes from its grant until it releases or its
// validity deadline), nor more than K a semaphore of K slots, nor two one
// slot; every grant's fence (a hand-over's too) is above every earlier
// one's of the same slot (0 for a lock: every earlier one's).
//
// What is abstracted, honestly: the agent's control flow around these
// decisions is the model's own (the steps mirror Cluster.Acquire, complete,
// settleFence, the watchdog's apply and Release, but they are not that
// code); a master restart and a FLUSHALL are one event (miniredis has no
// run_id, so the gate's run_id check is not exercised: data restored from a
// stale snapshot is not in this world); the masters start bootstrapped with
// the first agent's settings, and the settings command (a marker changed
// to new settings, how=change) is not in this world; the queue, shared locks, the
// contender's back-off (an attempt may come at any moment), a cohort's
// refill of a further block and agent restarts are not modelled; the agents share the model
// clock, and a master's clock may only jump ahead of it by a set amount
// (World.Skew, standing for the drift it gathers over a lease); time stops only at
// instants where something is due, which keeps the order of every deadline
// against every delivery but not the exact delays between them. Two
// reductions keep the search small: shortcuts (a round delivered at once to
// a majority, a release or renewal to every master: each also reachable one
// delivery at a time, in more events), and the masters' symmetry (states
// that differ only in which master is which are one state).
package model

import (
	"fmt"
	"runtime/debug"
	"strings"
	"time"
)

// Result is what a check found.
type Result struct {
	Explored int           // states reached, counting repeats (transitions)
	Distinct int           // distinct states
	Depth    int           // the deepest level reached
	Evals    int           // scripts run on the masters (the rest were remembered)
	Elapsed  time.Duration // wall-clock time of the check
	// Delivered counts the messages delivered in the search, by kind
	// (acquire, renew, write-back, raise, release, repair): what the
	// search exercised.
	Delivered map[string]int
	Violation string   // the broken invariant, "" if none was found
	Trace     []string // the events that led to it, with times and answers
}

func (r Result) String() string {
	return fmt.Sprintf("%d states explored, %d distinct, depth %d, %d script runs, %v; delivered %v",
		r.Explored, r.Distinct, r.Depth, r.Evals, r.Elapsed.Round(time.Millisecond), r.Delivered)
}

// node is a state reached and how: its parent and the event from it.
type node struct {
	parent *node
	at     int64 // the model time after the event
	label  label
	state  *state
}

// Check explores every interleaving of w's events up to w.Depth, breadth
// first (so a counterexample found is a shortest one), and stops at the
// first state that breaks an invariant.
func Check(w World) (Result, error) {
	c, err := newChecker(w)
	if err != nil {
		return Result{}, err
	}
	defer c.run.close()
	// The search makes many small short-lived states: collect less often.
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	s := search{c: c, began: time.Now()}
	return s.run(w.Depth), nil
}

// search is one breadth-first search of a world.
type search struct {
	c     *checker
	began time.Time
	seen  map[[16]byte]struct{}
	res   Result
}

func (s *search) run(maxDepth int) Result {
	root := &node{state: s.c.initial()}
	s.seen = map[[16]byte]struct{}{root.state.digest(): {}}
	level := []*node{root}
	for depth := 0; depth < maxDepth && len(level) > 0; depth++ {
		var nextLevel []*node
		for _, n := range level {
			for _, st := range s.c.successors(n.state) {
				s.res.Explored++
				child := &node{parent: n, at: st.next.now, label: st.label, state: st.next}
				if v := s.c.violation(st.next); v != "" {
					s.res.Violation, s.res.Trace, s.res.Depth = v, child.trace(), depth+1
					return s.result()
				}
				d := st.next.digest()
				if _, ok := s.seen[d]; ok {
					continue
				}
				s.seen[d] = struct{}{}
				nextLevel = append(nextLevel, child)
			}
			n.state = nil // a state is kept only until its level is expanded
		}
		if len(nextLevel) > 0 {
			s.res.Depth = depth + 1
		}
		level = nextLevel
	}
	return s.result()
}

// result is what the search found so far, with its counts.
func (s *search) result() Result {
	r := s.res
	r.Distinct, r.Evals, r.Elapsed = len(s.seen), s.c.run.evals, time.Since(s.began)
	r.Delivered = map[string]int{}
	for k, n := range s.c.delivered {
		r.Delivered[kindNames[k]] = n
	}
	return r
}

func newChecker(w World) (*checker, error) {
	agents, err := newAgents(w)
	if err != nil {
		return nil, err
	}
	run, err := newRunner()
	if err != nil {
		return nil, err
	}
	c := &checker{world: w, agents: agents, run: run}
	for ai, a := range agents {
		for range a.Clients {
			c.owner = append(c.owner, ai)
		}
	}
	return c, nil
}

// violation is the invariant s breaks, "" if none: more clients that
// believe they hold the name than it has slots (one for a lock), or two
// that believe they hold one slot; else a grant's fence out of order
// (checked at the grant: see finish).
func (c *checker) violation(s *state) string {
	var holders []string
	bySlot := map[int]int{}
	shared := false
	for ci, cl := range s.clients {
		if cl.phase == holding && cl.deadline > s.now {
			holders = append(holders, fmt.Sprintf("%s (slot %d, fence %d, valid until %d ms)", c.clientName(ci), cl.slot, cl.fence, cl.deadline))
			bySlot[cl.slot]++
			shared = shared || bySlot[cl.slot] > 1
		}
	}
	switch {
	case len(holders) > max(c.world.Limit, 1):
		return fmt.Sprintf("%d clients believe they hold the name (%d may): %s", len(holders), max(c.world.Limit, 1), strings.Join(holders, " and "))
	case shared:
		return "two clients believe they hold one slot: " + strings.Join(holders, " and ")
	}
	return s.violation
}

// trace is the events from the root to n.
func (n *node) trace() []string {
	var out []string
	for ; n.parent != nil; n = n.parent {
		out = append(out, fmt.Sprintf("t=%d ms: %v", n.at, n.label))
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}
