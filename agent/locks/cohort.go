package locks

import (
	"time"

	"github.com/lock-agent/lock-agent/protocol"
	"github.com/lock-agent/lock-agent/quorum"
	"github.com/lock-agent/lock-agent/renewal"
)

// Runs of local holders: the lending policy for a name local clients take
// turns on (see lend.go, which says why it is safe). A name held
// exclusively (no ttl=, no limit=, not shared) whose holder lets go while
// the next waiter of this agent's queue wants the same kind of hold is
// passed to that waiter inside the agent (passTo), with the next fence of
// the block its grant reserved (quorum.AcquireRequest.FenceBlock). A run
// that goes on reserves a further block on the masters before its block is
// used up (refillDueLocked), so that it does not end with a release and a
// new grant that its own next waiter would make anyway. A hold with less
// than half a lease of validity left is released, not passed on.
//
// Fairness. Other agents' waiters would wait for the whole run: an agent
// whose attempt finds the name held says so on the name's release channel
// (quorum.Cluster.Wanted), and the holding agent, subscribed while it has
// waiters for the name, then ends the run at the first release after
// cohort_max_hold from its grant and stands back for cohortYield before it
// tries the masters again, so that the waiter that was woken by its release
// wins. A message and not a marker key: a key would have to be read, and
// reading it on each hand-over would cost a round trip that the run is
// there to save, while the subscription exists anyway (it wakes the agent's
// own waiters) and a PUBLISH costs the waiting agent nothing it waits for.
// Messages are lost while a master is unreachable or before the holder's
// subscription is made; then the run ends within refillFor and a block
// (cohort_max_handoffs hand-overs), and the waiter, woken by that release,
// says so again if it loses the race. Nothing safe depends on them. Once
// another agent said it waits, the run reserves no further block and drops
// a spare one: it ends within cohort_max_handoffs hand-overs or
// cohort_max_hold, whichever comes first.
//
// The fair queue. A waiter with a place in the masters' queue (fair=true, or
// a writer that readers kept out) is never passed a name: it is granted
// through the masters, in the queue's order. Another agent's queued waiter
// says it waits like any other, so a run passes a name to a local waiter
// ahead of it for at most cohort_max_hold.

// cohortOn says whether lock cohorting is configured.
func (a *Manager) cohortOn() bool {
	return a.cfg.CohortMaxHandoffs > 0 && a.cfg.CohortMaxHold > 0
}

// cohortYield is how long the agent stands back after a run that another
// agent waited for ended, before it tries the masters for its own waiters.
func (a *Manager) cohortYield() time.Duration { return a.cfg.CohortMaxHold / 2 }

// cohortBlock is how many fences a grant that may start a run, and each
// further block of the run, reserves.
func (a *Manager) cohortBlock() int { return a.cfg.CohortMaxHandoffs + 1 }

// newRun is a run of rh's record that lends next … top first.
func (a *Manager) newRun(rh *renewal.Hold, next, top int64, record quorum.Record) *lending {
	return &lending{policy: lendRun, name: rh.Name, rh: rh, mode: protocol.Exclusive, record: record,
		next: next, top: top, block: a.cohortBlock()}
}

// startCohortLocked makes h, just granted with g, the first holder of a run
// if g reserved a run's block, or a cache's block (cacheGrantBlock) and a
// waiter queued behind it while its round was on its way: the round's
// block was chosen before that waiter came. manager.mu is held.
func (a *Manager) startCohortLocked(h *Hold, l protocol.Lock, g quorum.Grant) {
	if !a.cohortOn() || !lendable(l, lendRun) || g.Record.Top == g.Fence {
		return
	}
	if g.Record.Top-g.Fence < int64(a.cohortBlock())-1 && a.cohortHeadLocked(h.rh.Name) == nil {
		return
	}
	// A cache's block may hold more fences than a run may pass on.
	top := min(g.Record.Top, g.Fence+int64(a.cohortBlock())-1)
	a.beginRunLocked(h, a.newRun(h.rh, g.Fence+1, top, g.Record))
}

// beginRunLocked makes h the first holder of the run c: it starts now, and
// is wanted elsewhere if another agent said so within wantedFor. Every run
// starts here: from a grant's block (startCohortLocked), a block reserved
// later (reserveRun) or a cache's (runFromCacheLocked). manager.mu is held.
func (a *Manager) beginRunLocked(h *Hold, c *lending) {
	if !a.startLendingLocked(c) {
		return
	}
	c.started = a.clock.Now()
	if q := a.queueLocked(c.name); q != nil {
		q.mu.Lock()
		c.wanted = c.started.Sub(q.wantedAt) < wantedFor
		q.mu.Unlock()
	}
	h.lent = c
}

// endCohortLocked ends h's run, if h is its holder: h's hold is about to be
// released or was lost. After a run another agent waited for, the queue
// stands back (see cohortYield) and it says so: the release is then a
// hand-over (quorum.Cluster.HandOver). manager.mu is held.
func (a *Manager) endCohortLocked(h *Hold) (handOver bool) {
	c := h.lent
	if c == nil || c.policy != lendRun || !a.lendsLocked(c) {
		return false
	}
	a.stopLendingLocked(c)
	if !c.wanted {
		return false
	}
	if q := a.queueLocked(c.name); q != nil {
		q.mu.Lock()
		q.yieldUntil = a.clock.Now().Add(a.cohortYield())
		q.mu.Unlock()
	}
	return true
}

// leaveCohort stops h's run from passing the name on: the hold changed in a
// way a new holder must not inherit (EXTEND set another lease, a downgrade
// made it shared). Its release is then a real one.
func (a *Manager) leaveCohort(h *Hold) {
	a.mu.Lock()
	if c := h.lent; c != nil && c.policy == lendRun && a.lendsLocked(c) {
		a.stopLendingLocked(c)
	}
	h.cacheable = false // nor may it be cached for one
	h.lateFailed = true // nor start one later
	a.mu.Unlock()
}

// lateRun is for w, a cohortable head of q, queued behind a lock this
// agent holds whose grant reserved no run's block (nobody waited here
// then): it reserves one for that hold's record on the masters, in the
// background, as a run's refill does, and then makes the hold the first
// of a run, so that its release passes the name to w with no round on
// the masters (see reserveRun). It says whether a run exists or is being
// made: the contender then waits for it (awaitCohort) instead of asking
// the masters, which would only answer BUSY.
func (a *Manager) lateRun(q *queue, w *Waiter) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.runLocked(q.name) != nil {
		return true
	}
	h := a.exclusiveLocked(q.name)
	switch {
	case !a.cohortOn() || a.stopping || h == nil || h.lent != nil && h.lent.policy == lendRun || h.lateFailed:
		return false
	case h.lent != nil:
		return a.runFromCacheLocked(h)
	case !h.cohortable:
		return false
	case h.reserving:
		return true
	}
	h.reserving = true
	go a.reserveRun(h)
	return true
}

// runFromCacheLocked makes h, a lock lent from its name's cache, the first
// holder of a run, with what is left of the cache's block: a local waiter
// came, so the record is passed on here instead of being kept for no one.
// The cache ends (its keeper stops); the run takes its record, its
// fences and its pending retag, and the masters are told the record is
// not cached (the cache's note of its lending may not have gone yet), nor kept: another
// agent's wait=0 try that finds it answers BUSY at once. The cache's
// spare block is not taken: it was reserved cacheBlock long, and a run
// counts on cohortBlock. h is not cached after the run either: a cache
// lent it once. manager.mu is held.
func (a *Manager) runFromCacheLocked(h *Hold) bool {
	c := h.lent
	if c.holder != h || c.ended || c.wanted || c.mode != protocol.Exclusive || a.cacheLocked(c.name) != c || c.next > c.top {
		return false
	}
	a.endCacheLocked(c)
	run := a.newRun(c.rh, c.next, c.top, c.record)
	a.beginRunLocked(h, run)
	h.cacheable = false
	if c.retag {
		a.retagLocked(run)
	}
	go a.cluster.Unkeep(a.runCtx, run.name, run.rh.Holder)
	return true
}

// reserveRun reserves a run's block for h's record and, if h still holds
// it and no run started meanwhile, makes h the first holder of a run that
// hands out the block from its first fence. Either way the name's waiters
// look again.
func (a *Manager) reserveRun(h *Hold) {
	name, block := h.rh.Name, a.cohortBlock()
	first, err := a.cluster.Reserve(a.runCtx, name, h.rh.Holder, block)
	a.mu.Lock()
	defer a.mu.Unlock()
	h.reserving = false
	if q := a.queueLocked(name); q != nil {
		defer q.poke()
	}
	if err != nil {
		h.lateFailed = true
		return
	}
	if holderOf(h.rh) != h || h.lent != nil || a.lentLocked(name) != nil || a.stopping {
		return
	}
	var record quorum.Record
	top := first + int64(block) - 1
	if !a.watchdog.UpdateRecord(h.rh, func(r *quorum.Record) { r.Top = top; record = *r }) {
		return
	}
	a.beginRunLocked(h, a.newRun(h.rh, first, top, record))
}

// wantedFor is how long the agent takes another agent's word that it waits
// for a name: a waiter says so once per attempt, and goes on waiting after
// it (the runs that start meanwhile must know), while a waiter that left
// costs the runs of the next wantedFor their length beyond cohort_max_hold.
const wantedFor = time.Second

// cohortWanted notes that another agent waits for q's name.
func (a *Manager) cohortWanted(q *queue) {
	a.mu.Lock()
	defer a.mu.Unlock()
	q.mu.Lock()
	q.wantedAt = a.clock.Now()
	q.mu.Unlock()
	if c := a.runLocked(q.name); c != nil {
		c.wanted = true
		c.spare = 0 // at most cohort_max_handoffs more hand-overs from here
	}
}

// handOff passes h's name, which h's session has just let go (h is out of
// the session's holds), to the head of the name's queue without a release
// in the masters, and says whether it did. If not, the caller releases h.
func (a *Manager) handOff(h *Hold) bool {
	a.mu.Lock()
	c := h.lent
	a.mu.Unlock()
	return a.passOn(h, c)
}

// passOn passes h's name, if h is in the run c, to the head of the name's
// queue (see handOff).
func (a *Manager) passOn(h *Hold, c *lending) bool {
	if c == nil || c.policy != lendRun {
		return false
	}
	for range 3 { // a head that went away meanwhile: the next one
		w := a.cohortHead(c.name)
		if w == nil {
			return false
		}
		switch r, pass := a.passTo(h, c, w); pass {
		case passed:
			w.end(r)
			return true
		case gone:
			continue
		default:
			return false
		}
	}
	return false
}

// cohortHead is the head of name's queue if it may take the name from a run.
func (a *Manager) cohortHead(name string) *Waiter {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cohortHeadLocked(name)
}

// cohortHeadLocked is cohortHead with manager.mu held.
func (a *Manager) cohortHeadLocked(name string) *Waiter {
	q := a.queueLocked(name)
	if q == nil {
		return nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.waiters) == 0 || q.waiters[0].state != queued || !lendable(q.waiters[0].req, lendRun) {
		return nil
	}
	if w := q.waiters[0]; w.entry != nil || w.wantsEntry {
		// It has (or is getting) a place in the masters' queue: it is
		// granted in that queue's order, through the masters.
		return nil
	}
	return q.waiters[0]
}

type passResult int

const (
	passed  passResult = iota
	gone               // w left the queue meanwhile: try the next head
	refused            // the run may not go on: release
)

// passTo makes w the holder of h's name. Everything is decided and done
// under w's session's mu, manager.mu and the queue's mu (the lock order), so
// that a loss, a withdrawal or a session closing either happen before (and
// the pass is refused) or find w's new hold.
func (a *Manager) passTo(h *Hold, c *lending, w *Waiter) (r Result, pass passResult) {
	pass = refused // w's session is closing, or holds the name already
	w.sess.Adopt(w, func() *Hold {
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.stopping || holderOf(h.rh) != h || !a.lendsLocked(c) || !a.mayPassLocked(c) {
			return nil
		}
		validity, ok := a.lendValidity(h.rh)
		if !ok {
			return nil
		}
		if !w.q.remove(w, granted) {
			pass = gone
			return nil
		}
		// The contender may be waiting for this very hand-over (awaitCohort):
		// it looks at its queue again, for a new head or to retire an empty
		// queue. Else a LOCK that joins the queue meanwhile finds it not
		// retired and no contender working for it until the next release.
		w.q.poke()
		a.leave(w) // an entry that came after cohortHead looked
		a.endHoldLocked(h)
		next := a.lendLocked(c, w.sess, w.req, w.who)
		if a.refillDueLocked(c) {
			c.reserving = true
			go a.reserve(c)
		}
		r, pass = next.Snapshot(validity), passed
		return next
	})
	return r, pass // the caller ends w's wait once the locks are let go
}

// mayPassLocked says whether c's run may go on: fences are left in its
// block, or it has a spare one and is younger than refillFor (a spare
// reserved just before refillFor would otherwise add a whole block to the
// rest of the current one), and no other agent has waited past
// cohort_max_hold. manager.mu is held.
func (a *Manager) mayPassLocked(c *lending) bool {
	age := a.clock.Now().Sub(c.started)
	if c.next > c.top && (c.spare == 0 || age >= refillFor) {
		return false
	}
	return !c.wanted || age < a.cfg.CohortMaxHold
}

// refillFor is how long a run that no other agent said it waits for goes
// on reserving further blocks (see reserve). It bounds such a run when a
// waiter's word was lost (a message sent while a master was unreachable):
// the run then ends within refillFor and one block.
const refillFor = 250 * time.Millisecond

// refillDueLocked says whether c's run should reserve a further block now:
// a quarter of its block is spent (the rest leaves the reservation time to
// come back on a busy host, and a short run reserves nothing more), it has
// no spare, and it may go on: no other agent said it waits, and it is
// younger than refillFor. manager.mu is held.
func (a *Manager) refillDueLocked(c *lending) bool {
	block := int64(a.cohortBlock())
	return !c.reserving && !c.reserveFailed && c.spare == 0 && !c.wanted &&
		c.top-c.next < block*3/4 && a.clock.Now().Sub(c.started) < refillFor
}
