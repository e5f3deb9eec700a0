package model

import (
	"fmt"
	"slices"

	"github.com/lock-agent/lock-agent/quorum"
)

// checker runs the world's events on states.
type checker struct {
	world  World
	agents []agentModel
	run    *runner
	owner  []int // the agent of each client
	// delivered counts the messages delivered in the search, by kind.
	delivered [len(kindNames)]int
}

// step is one event taken from a state: what happened (for the trace) and
// the state after.
type step struct {
	label label
	next  *state
}

// label says what a step did. It is formatted only for a trace.
type label struct {
	format string
	args   []any
}

func lbl(format string, args ...any) label { return label{format, args} }

func (l label) String() string { return fmt.Sprintf(l.format, l.args...) }

func (c *checker) agentOf(ci int) *agentModel { return &c.agents[c.owner[ci]] }

func (c *checker) clientName(ci int) string {
	a := c.agentOf(ci)
	return fmt.Sprintf("a%dc%d", a.index, ci-a.first)
}

// initial is the world at time 0: every master new and bootstrapped (an
// epoch marker with no quarantine, recording agent 0's settings), probed by
// every agent in turn (so that each knows what the markers record), every
// client idle.
func (c *checker) initial() *state {
	s := &state{crashed: make([]bool, len(c.agents)), views: make([]markerViews, len(c.agents))}
	for i := range masters {
		_, s.masters[i] = c.run.run(emptyKeyspace, 0, "bootstrap", func() quorum.ScriptCall { return c.agents[0].cluster.ModelBootstrap(i) })
	}
	for ai := range c.agents {
		for i := range masters {
			c.probe(s, ai, i)
		}
	}
	for range c.owner {
		s.clients = append(s.clients, client{})
	}
	return s
}

// successors are the events that may happen in s.
func (c *checker) successors(s *state) []step {
	var out []step
	for ci := range s.clients {
		out = append(out, c.clientSteps(s, ci)...)
	}
	for i, m := range s.net {
		if i > 0 && s.net[i-1] == m {
			continue // the same message twice: delivering either is the same event
		}
		out = append(out, c.deliverSteps(s, i)...)
	}
	out = append(out, c.probeSteps(s)...)
	if s.wipes < c.world.Wipes {
		for i := range masters {
			next := s.clone()
			next.masters[i] = emptyKeyspace
			next.wipes++
			out = append(out, step{lbl("m%d restarts empty (or is flushed)", i+1), next})
		}
	}
	if s.skews < c.world.Skews {
		for i := range masters {
			next := s.clone()
			next.skews++
			next.skew[i] += c.world.Skew.Milliseconds()
			next.masters[i] = next.masters[i].expire(next.clock(i))
			out = append(out, step{lbl("m%d's clock jumps %v ahead", i+1, c.world.Skew), next})
		}
	}
	if s.crashes < c.world.Crashes {
		for ai := range c.agents {
			if !s.crashed[ai] {
				out = append(out, step{lbl("a%d crashes", ai), c.crash(s, ai)})
			}
		}
	}
	if t := c.nextInstant(s); t > s.now {
		out = append(out, step{lbl("time advances to %d ms", t), c.advance(s, t)})
	}
	return out
}

// clientSteps are what client ci (or its agent for it) may do of its own
// accord: start an attempt, release, renew, give up waiting for answers.
func (c *checker) clientSteps(s *state, ci int) []step {
	cl := &s.clients[ci]
	who := c.clientName(ci)
	var out []step
	switch {
	case cl.phase == idle && cl.attempts < c.world.Attempts:
		out = c.atOnce(s, ci, majorities, func(next *state) { c.startAcquire(next, ci) }, "%s starts acquire", who)
	case cl.phase == holding:
		out = c.atOnce(s, ci, everywhere, func(next *state) { c.release(next, ci) }, "%s releases", who)
		out = append(out, c.handOverSteps(s, ci)...)
		if !cl.renewing && s.now >= cl.renewAt {
			out = append(out, c.atOnce(s, ci, everywhere, func(next *state) {
				next.clients[ci].renewing = true
				c.startRound(next, ci, renewCall)
			}, "%s's watchdog renews", who)...)
		}
	}
	if (cl.phase == acquiring || cl.phase == settling || cl.renewing) && hasPending(&cl.round) {
		next := s.clone()
		c.timeout(next, ci)
		out = append(out, step{lbl("%s's round times out", who), next})
	}
	return out
}

// The sets of masters a shortcut delivers to at once (see atOnce): each
// majority, or all of them.
var (
	majorities = []int{0b011, 0b101, 0b110, 0b111}
	everywhere = []int{0b111}
)

// atOnce is the event send (which sends client ci's calls to the masters),
// with its calls left on their way, and also with them delivered at once
// (in master order, their answers heard) to each set of masters in masks.
// The second kind is a shortcut: each is also reached by delivering the
// calls one by one, but in fewer events, so that a bounded depth reaches
// further.
func (c *checker) atOnce(s *state, ci int, masks []int, send func(*state), format string, args ...any) []step {
	next := s.clone()
	send(next)
	out := []step{{lbl(format, args...), next}}
	sent := next.net
	for _, mask := range masks {
		next := s.clone()
		send(next)
		var replies []any
		for _, m := range sent {
			if m.client == ci && mask&(1<<m.master) != 0 && !slices.Contains(s.net, m) {
				replies = append(replies, fmt.Sprintf("m%d %v", m.master+1, c.deliverNow(next, m, true)))
			}
		}
		// A won acquire's fence write-back, which its grant waits for, goes
		// to the same masters at once too.
		for _, m := range slices.Clone(next.net) {
			if m.client == ci && m.kind == writeBackCall && mask&(1<<m.master) != 0 && slices.Contains(next.net, m) {
				replies = append(replies, fmt.Sprintf("write-back m%d %v", m.master+1, c.deliverNow(next, m, true)))
			}
		}
		out = append(out, step{lbl(format+", delivered at once: %v", append(args, replies)...), next})
	}
	return out
}

// hasPending tells whether r still waits for a master's answer.
func hasPending(r *round) bool {
	for _, a := range r.answers {
		if a == pending {
			return true
		}
	}
	return false
}

// startAcquire starts client ci's next attempt: a new holder id, the
// acquire script sent to every master.
func (c *checker) startAcquire(s *state, ci int) {
	cl := &s.clients[ci]
	cl.attempts++
	cl.holder = fmt.Sprintf("%st%d", c.clientName(ci), cl.attempts)
	cl.phase = acquiring
	c.startRound(s, ci, acquireCall)
}

// startRound sends client ci's round of kind k to every master.
func (c *checker) startRound(s *state, ci int, k kind) {
	cl := &s.clients[ci]
	cl.round = round{seq: cl.round.seq + 1, start: s.now}
	for i := range masters {
		cl.round.answers[i] = pending
		s.send(c.message(s, ci, i, k, 0))
	}
}

// message is client ci's message of kind k to master i, part of its
// current round if k is a round's kind.
func (c *checker) message(s *state, ci, i int, k kind, fence int64) message {
	cl := &s.clients[ci]
	m := message{master: i, kind: k, agent: c.owner[ci], client: ci, holder: cl.holder, fence: fence}
	if k == acquireCall || k == renewCall || k == writeBackCall {
		m.seq = cl.round.seq
	}
	if k == acquireCall || k == renewCall || k == repairCall {
		m.mayPlant, _ = s.views[m.agent].decisions()
	}
	return m
}

// release gives client ci's hold back: it no longer believes it holds the
// name, and the release goes to every master.
func (c *checker) release(s *state, ci int) {
	c.sendAll(s, ci, releaseCall)
	c.endHold(s, ci)
}

// sendAll sends client ci's call of kind k (not a round's) to every master.
func (c *checker) sendAll(s *state, ci int, k kind) {
	for i := range masters {
		s.send(c.message(s, ci, i, k, 0))
	}
}

// endHold makes client ci hold nothing: idle for its next attempt, or done.
func (c *checker) endHold(s *state, ci int) {
	cl := &s.clients[ci]
	cl.phase, cl.renewing, cl.fence, cl.start, cl.deadline, cl.renewAt, cl.grantSeq, cl.busyOn = idle, false, 0, 0, 0, 0, 0, 0
	cl.grantFence, cl.blockEnd = 0, 0
	cl.round.answers = [masters]answer{}
	cl.round.fences = [masters]int64{}
	cl.round.slots = [masters]int{}
	cl.slot = 0
	cl.round.atFence, cl.round.start = 0, 0
	if cl.attempts >= c.world.Attempts {
		cl.phase = done
	}
}

// crash ends agent ai: its clients hold nothing and ask no more. What it
// sent is still on its way (or lost); its records stay until their PX.
func (c *checker) crash(s *state, ai int) *state {
	next := s.clone()
	next.crashed[ai] = true
	next.crashes++
	next.views[ai] = markerViews{} // never used again: crashed agents' views are one state
	a := &c.agents[ai]
	for ci := a.first; ci < a.first+a.Clients; ci++ {
		next.clients[ci] = client{phase: done, round: round{seq: next.clients[ci].round.seq}}
	}
	return next
}

// timeout counts client ci's unanswered masters as failed, and decides.
func (c *checker) timeout(s *state, ci int) {
	r := &s.clients[ci].round
	for i, a := range r.answers {
		if a == pending {
			r.answers[i] = failed
		}
	}
	c.decide(s, ci)
}

// probeSteps are the agents' health probes: each running agent's of each
// master. The probe runs the gate with the agent's decisions (it plants a
// marker quarantined for the agent's Quarantine on a master that has none,
// when it may, and re-plants one that records other settings, when it
// knows a majority records its own), and the agent's view of the master
// becomes what the reply says. A probe that changes neither the master nor
// the view is the state itself, and is left out.
func (c *checker) probeSteps(s *state) []step {
	var out []step
	for ai := range c.agents {
		if s.crashed[ai] {
			continue
		}
		for i := range masters {
			next := s.clone()
			reply := c.probe(next, ai, i)
			if next.masters[i].digest == s.masters[i].digest && next.views[ai] == s.views[ai] {
				continue
			}
			out = append(out, step{lbl("a%d probes m%d: %v", ai, i+1, reply), next})
		}
	}
	return out
}

// probe runs agent ai's probe of master i in s, updates its view as the
// probe reads the reply (quorum.ModelProbeView), and returns the reply.
func (c *checker) probe(s *state, ai, i int) any {
	a := &c.agents[ai]
	mayPlant, replant := s.views[ai].decisions()
	tag := fmt.Sprintf("probe %d %v %v", ai, mayPlant, replant)
	reply, after := c.run.run(s.masters[i], s.clock(i), tag, func() quorum.ScriptCall {
		return c.patch(a.cluster.ModelProbe(i, mayPlant, replant))
	})
	s.masters[i] = after
	if vals, ok := reply.([]any); ok && len(vals) == 6 {
		recorded, _ := vals[3].(string)
		refusal, _ := vals[4].(string)
		if view, ok := a.cluster.ModelProbeView(recorded, refusal); ok {
			s.views[ai][i] = view
		}
	}
	return reply
}

// patch applies the world's Patch to call.
func (c *checker) patch(call quorum.ScriptCall) quorum.ScriptCall {
	if c.world.Patch != nil {
		call.Src = c.world.Patch(call.Src)
	}
	return call
}

// handOverSteps are client ci's hold passed to another client of its
// agent that has an attempt left (lock cohorting, agent/locks/cohort.go): the
// masters' record stays, under its holder id, and the watchdog keeps
// renewing it; ci stops believing it holds the name and the other client
// starts, with the next fence of the grant's block. A hold is passed only
// with half a lease of validity left, and, in the model, not while a
// renewal is in flight (its answers name ci). The agent's refill of a
// further block (Cluster.Reserve) is not modelled: a run ends with its
// block.
func (c *checker) handOverSteps(s *state, ci int) []step {
	cl := &s.clients[ci]
	a := c.agentOf(ci)
	if cl.renewing || cl.fence >= cl.blockEnd || cl.deadline-s.now < a.Lease.Milliseconds()/2 {
		return nil
	}
	var out []step
	for to := a.first; to < a.first+a.Clients; to++ {
		if to == ci || s.clients[to].phase != idle || s.clients[to].attempts >= c.world.Attempts {
			continue
		}
		next := s.clone()
		held, taker := &next.clients[ci], &next.clients[to]
		attempts, seq := taker.attempts+1, taker.round.seq
		*taker = *held
		taker.attempts, taker.round = attempts, round{seq: seq}
		taker.grantSeq = 0 // late answers to the grant's round name ci: the model drops them
		taker.fence++
		next.granted(taker.fence, taker.slot, "handed to "+c.clientName(to))
		c.endHold(next, ci)
		out = append(out, step{lbl("%s hands the name to %s: fence %d", c.clientName(ci), c.clientName(to), taker.fence), next})
	}
	return out
}
