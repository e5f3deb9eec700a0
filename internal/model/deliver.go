package model

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/lock-agent/lock-agent/quorum/rules"

	"github.com/lock-agent/lock-agent/quorum"
)

// deliverSteps are the fates of message i of s: delivered (the script runs
// on its master and the answer comes back) and, in a lossy world, for a
// round's message also delivered with its answer lost. A message delayed is
// one still in the net while other events happen (which is also what a
// paused master looks like), and one lost on its way is one that stays
// there: its round times out without it.
func (c *checker) deliverSteps(s *state, i int) []step {
	m := s.net[i]
	deliver := func(heard bool) step {
		next := s.clone()
		reply := c.deliverNow(next, m, heard)
		if !heard {
			return step{lbl("%s %s→m%d runs: %v, answer lost", kindNames[m.kind], m.holder, m.master+1, reply), next}
		}
		return step{lbl("%s %s→m%d runs: %v", kindNames[m.kind], m.holder, m.master+1, reply), next}
	}
	out := []step{deliver(true)}
	if c.world.Lossy && m.seq > 0 {
		out = append(out, deliver(false))
	}
	return out
}

// deliverNow takes m (on its way in s) off the net, runs it, and, if heard,
// lets its agent read the answer. It returns the reply.
func (c *checker) deliverNow(s *state, m message, heard bool) any {
	i := slices.Index(s.net, m)
	s.net = slices.Delete(s.net, i, i+1)
	c.delivered[m.kind]++
	reply := c.deliver(s, m)
	if heard {
		c.hear(s, m, reply)
	}
	return reply
}

// deliver runs m's script on its master at s's time, and returns the reply.
func (c *checker) deliver(s *state, m message) any {
	a := &c.agents[m.agent]
	tag := fmt.Sprintf("%d %d %d %s %d %d %v", m.agent, m.master, m.kind, m.holder, m.fence, m.slot, m.mayPlant)
	reply, after := c.run.run(s.masters[m.master], s.clock(m.master), tag, func() quorum.ScriptCall {
		return c.patch(a.call(m))
	})
	s.masters[m.master] = after
	return reply
}

// hear is client m.client's agent reading the answer to m.
func (c *checker) hear(s *state, m message, reply any) {
	cl := &s.clients[m.client]
	if c.current(cl, m) {
		cl.round.answers[m.master] = c.judge(cl, m, reply)
		c.decide(s, m.client)
		return
	}
	// A late answer to the round that won the client's grant: a master
	// that granted another slot gives it back, one that did not grant the
	// same fence is brought up to it (Cluster.complete's r.late).
	if m.kind != acquireCall || (cl.phase != settling && cl.phase != holding) || cl.grantSeq != m.seq {
		return
	}
	vals, err := ints(reply)
	switch {
	case err != nil:
	case len(vals) == 3 && vals[0] == 1 && int(vals[2]) != cl.slot:
		s.send(c.message(s, m.client, m.master, releaseCall, 0))
	case len(vals) != 3 || vals[1] != cl.fence:
		s.send(c.message(s, m.client, m.master, raiseCall, cl.fence))
	}
}

// current tells whether m's answer is one client cl's round waits for.
func (c *checker) current(cl *client, m message) bool {
	if m.seq == 0 || m.seq != cl.round.seq || cl.round.answers[m.master] != pending {
		return false
	}
	switch m.kind {
	case acquireCall:
		return cl.phase == acquiring
	case writeBackCall:
		return cl.phase == settling
	}
	return cl.phase == holding && cl.renewing
}

// judge reads a master's reply to m as the agent does. An error reply is a
// failed master, as a round counts it (quorum's collect): the gate's
// refusals too, SETTINGS (the marker records other settings) and UNPLANTED
// (no marker, and the agent may not plant one), which only name the
// round's error.
func (c *checker) judge(cl *client, m message, reply any) answer {
	vals, err := ints(reply)
	switch {
	case err != nil:
		return failed
	case m.kind == writeBackCall:
		return yes
	case len(vals) == 2 && vals[0] == -2: // quarantined
		return failed
	case m.kind == renewCall && len(vals) == 2 && vals[0] == 0:
		if vals[1] == 1 {
			return yes
		}
		return refused
	case m.kind == renewCall:
		return failed
	case len(vals) == 3 && vals[0] == 1:
		cl.round.fences[m.master], cl.round.slots[m.master] = vals[1], int(vals[2])
		return yes
	case len(vals) >= 2 && (vals[0] == 0 || vals[0] == -3):
		return refused
	}
	return failed
}

func count(r *round, want answer) int {
	n := 0
	for _, a := range r.answers {
		if a == want {
			n++
		}
	}
	return n
}

// decide moves client ci on once its round's answers allow.
func (c *checker) decide(s *state, ci int) {
	cl := &s.clients[ci]
	r := &cl.round
	switch cl.phase {
	case acquiring:
		granted := map[int]int{}
		for i, a := range r.answers {
			if a == yes {
				granted[r.slots[i]]++
			}
		}
		switch outcome, slot := rules.DecideSlots(masters, granted, count(r, refused)+count(r, failed)); outcome {
		case rules.Won:
			c.complete(s, ci, slot)
		case rules.Lost:
			// Decide gives back whatever may have been granted: any yes,
			// or any master that did not answer "held" (Cluster.decideAcquire).
			c.fail(s, ci, count(r, yes) > 0 || count(r, refused) < masters)
		}
	case settling:
		switch {
		case r.atFence+count(r, yes) >= rules.Majority(masters):
			c.settled(s, ci)
		case !hasPending(r):
			c.fail(s, ci, true)
		}
	case holding:
		if !hasPending(r) {
			c.renewed(s, ci)
		}
	}
}

// complete settles a won round's fence (rules.SettleFence): the masters
// behind it are brought up to it, and the grant waits for that when too few
// granted the fence itself.
func (c *checker) complete(s *state, ci int, slot int) {
	cl := &s.clients[ci]
	r := &cl.round
	for i, f := range r.fences { // the masters that granted another slot give it back
		if f > 0 && r.slots[i] != slot {
			r.fences[i] = 0
			s.send(c.message(s, ci, i, releaseCall, 0))
		}
	}
	fence, atFence, behind := rules.SettleFence(r.fences[:])
	cl.grantSeq, cl.fence, cl.slot, cl.start, cl.busyOn = r.seq, fence, slot, r.start, 0
	for i, a := range r.answers {
		if a == refused {
			cl.busyOn |= 1 << i
		}
	}
	if atFence >= rules.Majority(masters) {
		for _, i := range behind {
			s.send(c.message(s, ci, i, raiseCall, fence))
		}
		c.settled(s, ci)
		return
	}
	cl.phase = settling
	*r = round{seq: r.seq + 1, start: r.start, atFence: atFence}
	for _, i := range behind {
		r.answers[i] = pending
		s.send(c.message(s, ci, i, writeBackCall, fence))
	}
}

// settled is client ci's fence settled on a majority: the masters that
// answered "held" may lag behind it, so their counters are raised too
// (Cluster.complete), and the grant is finished.
func (c *checker) settled(s *state, ci int) {
	cl := &s.clients[ci]
	for i := range masters {
		if cl.busyOn&(1<<i) != 0 {
			s.send(c.message(s, ci, i, raiseCall, cl.fence))
		}
	}
	c.finish(s, ci)
}

// finish grants client ci the name if the round's validity is not used up.
// The grant is where the fence invariant is checked.
func (c *checker) finish(s *state, ci int) {
	cl := &s.clients[ci]
	a := c.agentOf(ci)
	if rules.Validity(a.Lease, ms(s.now-cl.start), a.DriftFactor) <= 0 {
		c.fail(s, ci, true)
		return
	}
	s.granted(cl.fence, cl.slot, "granted to "+c.clientName(ci))
	cl.grantFence, cl.blockEnd = cl.fence, cl.fence+int64(a.block)-1
	cl.phase = holding
	cl.deadline = cl.start + rules.Validity(a.Lease, 0, a.DriftFactor).Milliseconds()
	cl.renewAt = cl.start + a.Lease.Milliseconds()/3
	cl.round.answers = [masters]answer{}
}

// fail ends client ci's attempt, giving back what it may have won.
func (c *checker) fail(s *state, ci int, giveBack bool) {
	if giveBack {
		c.sendAll(s, ci, releaseCall)
	}
	c.endHold(s, ci)
}

// renewed applies client ci's renewal round, as the watchdog does: a
// majority that renewed has the hold re-created where it was gone
// (Cluster.Renew's repair) and moves the deadline to the round's start +
// lease − drift; a majority that answered "gone" makes the hold lost at once.
func (c *checker) renewed(s *state, ci int) {
	cl := &s.clients[ci]
	a := c.agentOf(ci)
	r := &cl.round
	cl.renewing = false
	if count(r, yes) >= rules.Majority(masters) {
		for i, ans := range r.answers {
			if ans == refused {
				m := c.message(s, ci, i, repairCall, cl.grantFence)
				m.slot = cl.slot
				s.send(m)
			}
		}
	}
	cl.renewAt = r.start + a.Lease.Milliseconds()/3
	deadline := r.start + rules.Validity(a.Lease, 0, a.DriftFactor).Milliseconds()
	switch {
	case count(r, yes) >= rules.Majority(masters) && deadline > s.now:
		cl.deadline = max(cl.deadline, deadline)
	case count(r, refused) > masters-rules.Majority(masters):
		c.fail(s, ci, true)
	}
	r.answers = [masters]answer{}
}

// nextInstant is the next time at which something is due: a validity
// deadline, a renewal, a key's expiry, a quarantine's end (0: none).
func (c *checker) nextInstant(s *state) int64 {
	var next int64
	consider := func(t int64) {
		if t > s.now && (next == 0 || t < next) {
			next = t
		}
	}
	for ci, cl := range s.clients {
		a := c.agentOf(ci)
		switch cl.phase {
		case holding:
			consider(cl.deadline)
			if !cl.renewing {
				consider(cl.renewAt)
			}
		case acquiring, settling:
			consider(cl.round.start + rules.Validity(a.Lease, 0, a.DriftFactor).Milliseconds())
		}
	}
	for i, ks := range s.masters {
		if t := ks.nextExpiry(s.clock(i)); t > 0 {
			consider(t - s.skew[i])
		}
		if until, err := strconv.ParseInt(ks.field(markerKey, "until"), 10, 64); err == nil && until > 0 {
			consider(until - epochBase.UnixMilli() - s.skew[i])
		}
	}
	return next
}

// advance moves time to t: keys whose lease ran out expire, and a hold
// whose validity ended is lost (its client is told LOST, and its agent
// gives the name back).
func (c *checker) advance(s *state, t int64) *state {
	next := s.clone()
	next.now = t
	for i, ks := range next.masters {
		next.masters[i] = ks.expire(next.clock(i))
	}
	for ci, cl := range next.clients {
		if cl.phase == holding && cl.deadline <= t {
			c.fail(next, ci, true)
		}
	}
	return next
}
