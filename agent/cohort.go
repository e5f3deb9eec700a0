package agent

import (
	"time"

	"github.com/lock-agent/lock-agent/protocol"
	"github.com/lock-agent/lock-agent/quorum"
	"github.com/lock-agent/lock-agent/renewal"
)

// Lock cohorting. When many local clients take turns on one name, a release
// and a fresh acquire on the masters per turn cost most of each turn. So a
// name held exclusively (no ttl=, no limit=, not shared) whose holder lets
// go while the next waiter of this agent's queue wants the same kind of hold
// is passed to that waiter inside the agent: the record in the masters stays
// under its holder id and the watchdog keeps renewing it; the new holder gets
// a hold of its own with count 1 and the next fence of the block its grant
// reserved (quorum.AcquireRequest.FenceBlock). A run that goes on reserves
// a further block on the masters before its block is used up (refill), so
// that it does not end with a release and a new grant that its own next
// waiter would make anyway.
//
// Safety. Exclusion: the masters' record never lapses between the two local
// holders, and the agent ends one local hold before it starts the next,
// under the locks that order every grant. Fences: the grant reserved
// F … F+B-1 on a majority (every later grant, anywhere, counts past F+B-1),
// and the run hands out F+1, F+2, … in order and stops at F+B-1, or goes on
// with a further block that a majority reserved past every fence given out
// before (quorum.Cluster.Reserve) while the hold was still there. A hold
// with less than half a lease of validity left is released, not passed on,
// so a new holder never starts on a hold about to be lost; a loss of the
// record reaches whoever holds it then as * LOST, as for any hold.
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

// cohort is a name this agent holds exclusively in the masters and passes
// among its local holders. Its fields are guarded by Agent.mu.
type cohort struct {
	name    string
	rh      *renewal.Hold // the record in the masters, renewed by the watchdog
	next    int64         // the next fence to hand out
	top     int64         // the block's last fence
	started time.Time     // when the masters granted it
	wanted  bool          // another agent said it waits for the name
	record  quorum.Record // the current holder's, for WHO (see retag)
	// spare is the first fence of a further block reserved while the run
	// went on (see refill), 0 if none.
	spare int64
	// refilling says that a reservation is under way; refillFailed that
	// one failed, and the run ends with its blocks.
	refilling, refillFailed bool
	// retag says the holder changed since the record was last sent to the
	// masters; retagging that a goroutine is sending it.
	retag, retagging bool
}

// retagEvery spaces the rewrites of a passed-on record's who-info, so that
// a fast run costs the masters at most one small script per interval.
const retagEvery = 10 * time.Millisecond

// cohortOn says whether lock cohorting is configured.
func (a *Agent) cohortOn() bool {
	return a.cfg.Lock.CohortMaxHandoffs > 0 && a.cfg.Lock.CohortMaxHold > 0
}

// cohortYield is how long the agent stands back after a run that another
// agent waited for ended, before it tries the masters for its own waiters.
func (a *Agent) cohortYield() time.Duration { return a.cfg.Lock.CohortMaxHold / 2 }

// cohortable says whether a LOCK may take part in a run of local holders:
// an exclusive lock kept by the watchdog.
func cohortable(l protocol.Lock) bool {
	return l.Mode != protocol.Shared && limitOf(l) == 1 && l.TTL == 0 && !l.Fair && !tailOf(l).Any()
}

// fenceBlock is how many fences an attempt for q's head w reserves: a
// block when the waiter behind w could take the name from it, else one
// (no fences are spent on a run that cannot start).
func (a *Agent) fenceBlock(q *queue, w *waiter) int {
	least := 1
	if a.cacheOn() && cacheable(w.req) && w.done == nil && w.reused {
		least = cacheGrantBlock // its record may be cached and lent on: see cache.go
	}
	if !a.cohortOn() || !cohortable(w.req) {
		return least
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.waiters) < 2 || q.waiters[0] != w || !cohortable(q.waiters[1].req) {
		return least
	}
	return a.cohortBlock()
}

// cohortBlock is how many fences a grant that may start a run, and each
// further block of the run, reserves.
func (a *Agent) cohortBlock() int { return a.cfg.Lock.CohortMaxHandoffs + 1 }

// startCohortLocked makes h, just granted with g, the first holder of a run
// if g reserved a run's block, or a cache's block (cacheGrantBlock) and a
// waiter queued behind it while its round was on its way: the round's
// block was chosen before that waiter came. Agent.mu is held.
func (a *Agent) startCohortLocked(h *hold, l protocol.Lock, g quorum.Grant) {
	if !a.cohortOn() || !cohortable(l) || g.Record.Top == g.Fence {
		return
	}
	if g.Record.Top-g.Fence < int64(a.cohortBlock())-1 && a.cohortHeadLocked(h.rh.Name) == nil {
		return
	}
	// A cache's block may hold more fences than a run may pass on.
	top := min(g.Record.Top, g.Fence+int64(a.cohortBlock())-1)
	a.beginRunLocked(h, &cohort{name: h.rh.Name, rh: h.rh, next: g.Fence + 1, top: top, record: g.Record})
}

// beginRunLocked makes h the first holder of the run c: it starts now, and
// is wanted elsewhere if another agent said so within wantedFor. Every run
// starts here: from a grant's block (startCohortLocked), a block reserved
// later (reserveRun) or a cache's (runFromCacheLocked). Agent.mu is held.
func (a *Agent) beginRunLocked(h *hold, c *cohort) {
	c.started = a.clock.Now()
	if q := a.queueLocked(c.name); q != nil {
		q.mu.Lock()
		c.wanted = c.started.Sub(q.wantedAt) < wantedFor
		q.mu.Unlock()
	}
	h.cohort = c
	a.nameLocked(c.name).cohort = c
}

// retagLocked has c's current holder written into its record on the
// masters (see retagLoop), starting the loop if it is not running.
// Agent.mu is held.
func (a *Agent) retagLocked(c *cohort) {
	c.retag = true
	if !c.retagging {
		c.retagging = true
		go a.retagLoop(c)
	}
}

// endCohortLocked ends h's run, if h is its holder: h's hold is about to be
// released or was lost. After a run another agent waited for, the queue
// stands back (see cohortYield) and it says so: the release is then a
// hand-over (quorum.Cluster.HandOver). Agent.mu is held.
func (a *Agent) endCohortLocked(h *hold) (handOver bool) {
	c := h.cohort
	if c == nil || a.cohortLocked(c.name) != c {
		return false
	}
	a.endRunLocked(c)
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
func (a *Agent) leaveCohort(h *hold) {
	a.mu.Lock()
	if c := h.cohort; c != nil && a.cohortLocked(c.name) == c {
		a.endRunLocked(c)
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
func (a *Agent) lateRun(q *queue, w *waiter) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cohortLocked(q.name) != nil {
		return true
	}
	h := a.exclusiveLocked(q.name)
	switch {
	case !a.cohortOn() || a.stopping || h == nil || h.cohort != nil || h.lateFailed:
		return false
	case h.cache != nil:
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
// not cached (the keeper's unmark may not have gone yet), nor kept: another
// agent's wait=0 try that finds it answers BUSY at once. The cache's
// spare block is not taken: it was reserved cacheBlock long, and a run
// counts on cohortBlock. Agent.mu is held.
func (a *Agent) runFromCacheLocked(h *hold) bool {
	c := h.cache
	if c.holder != h || c.ended || c.wanted || c.mode != protocol.Exclusive || a.cacheLocked(c.name) != c || c.next > c.top {
		return false
	}
	a.endCacheLocked(c)
	run := &cohort{name: c.name, rh: c.rh, next: c.next, top: c.top, record: c.record}
	a.beginRunLocked(h, run)
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
func (a *Agent) reserveRun(h *hold) {
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
	if holderOf(h.rh) != h || h.cohort != nil || a.cohortLocked(name) != nil || a.stopping {
		return
	}
	var record quorum.Record
	top := first + int64(block) - 1
	if !a.watchdog.UpdateRecord(h.rh, func(r *quorum.Record) { r.Top = top; record = *r }) {
		return
	}
	a.beginRunLocked(h, &cohort{name: name, rh: h.rh, next: first, top: top, record: record})
}

// wantedFor is how long the agent takes another agent's word that it waits
// for a name: a waiter says so once per attempt, and goes on waiting after
// it (the runs that start meanwhile must know), while a waiter that left
// costs the runs of the next wantedFor their length beyond cohort_max_hold.
const wantedFor = time.Second

// cohortWanted notes that another agent waits for q's name.
func (a *Agent) cohortWanted(q *queue) {
	a.mu.Lock()
	defer a.mu.Unlock()
	q.mu.Lock()
	q.wantedAt = a.clock.Now()
	q.mu.Unlock()
	if c := a.cohortLocked(q.name); c != nil {
		c.wanted = true
		c.spare = 0 // at most cohort_max_handoffs more hand-overs from here
	}
}

// handOff passes h's name, which h's session has just let go (h is out of
// the session's holds), to the head of the name's queue without a release
// in the masters, and says whether it did. If not, the caller releases h.
func (a *Agent) handOff(h *hold) bool {
	a.mu.Lock()
	c := h.cohort
	a.mu.Unlock()
	if c == nil {
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
func (a *Agent) cohortHead(name string) *waiter {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cohortHeadLocked(name)
}

// cohortHeadLocked is cohortHead with Agent.mu held.
func (a *Agent) cohortHeadLocked(name string) *waiter {
	q := a.queueLocked(name)
	if q == nil {
		return nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.waiters) == 0 || q.waiters[0].state != queued || !cohortable(q.waiters[0].req) {
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
// under w's session's mu, Agent.mu and the queue's mu (the lock order), so
// that a loss, a withdrawal or a session closing either happen before (and
// the pass is refused) or find w's new hold.
func (a *Agent) passTo(h *hold, c *cohort, w *waiter) (result, passResult) {
	s := w.sess
	key := holdKey{c.name, w.req.Owner}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing || s.holds[key] != nil {
		return result{}, refused
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopping || holderOf(h.rh) != h || a.cohortLocked(c.name) != c || !a.mayPassLocked(c) {
		return result{}, refused
	}
	validity, ok := a.watchdog.Validity(h.rh)
	if !ok || validity < a.cfg.Lock.Lease/2 {
		return result{}, refused
	}
	if !w.q.remove(w, granted) {
		return result{}, gone
	}
	// The contender may be waiting for this very hand-over (awaitCohort):
	// it looks at its queue again, for a new head or to retire an empty
	// queue. Else a LOCK that joins the queue meanwhile finds it not
	// retired and no contender working for it until the next release.
	w.q.poke()
	a.leave(w)          // an entry that came after cohortHead looked
	if c.next > c.top { // the block is used up: the spare one takes over
		c.next, c.top, c.spare = c.spare, c.spare+int64(a.cohortBlock())-1, 0
	}
	next := &hold{rh: h.rh, sess: s, owner: w.req.Owner, fence: c.next, acquired: []protocol.Mode{w.req.Mode},
		mode: w.req.Mode, limit: 1, granted: time.Now(), gaugeMode: w.req.Mode, cohort: c, notifyWanted: w.req.NotifyWanted}
	c.next++
	if a.refillDueLocked(c) {
		c.refilling = true
		go a.refill(c)
	}
	a.endHoldLocked(h)
	a.startHoldLocked(next)
	s.holds[key] = next
	s.dropWaitLocked(w)
	who := w.who
	who.SinceMilli = time.Now().UnixMilli()
	c.record.Fence, c.record.Who = next.fence, who
	// A master that lacks the record gets it back with the new holder's
	// fence and who-info (and the counter at the block's end).
	a.watchdog.SetRecord(h.rh, c.record)
	a.retagLocked(c)
	return next.snapshot(validity), passed // the caller ends w's wait once the locks are let go
}

// mayPassLocked says whether c's run may go on: fences are left in its
// block, or it has a spare one and is younger than refillFor (a spare
// reserved just before refillFor would otherwise add a whole block to the
// rest of the current one), and no other agent has waited past
// cohort_max_hold. Agent.mu is held.
func (a *Agent) mayPassLocked(c *cohort) bool {
	age := a.clock.Now().Sub(c.started)
	if c.next > c.top && (c.spare == 0 || age >= refillFor) {
		return false
	}
	return !c.wanted || age < a.cfg.Lock.CohortMaxHold
}

// refillFor is how long a run that no other agent said it waits for goes
// on reserving further blocks (see refill). It bounds such a run when a
// waiter's word was lost (a message sent while a master was unreachable):
// the run then ends within refillFor and one block.
const refillFor = 250 * time.Millisecond

// refillDueLocked says whether c's run should reserve a further block now:
// a quarter of its block is spent (the rest leaves the reservation time to
// come back on a busy host, and a short run reserves nothing more), it has
// no spare, and it may go on: no other agent said it waits, and it is
// younger than refillFor. Agent.mu is held.
func (a *Agent) refillDueLocked(c *cohort) bool {
	block := int64(a.cohortBlock())
	return !c.refilling && !c.refillFailed && c.spare == 0 && !c.wanted &&
		c.top-c.next < block*3/4 && a.clock.Now().Sub(c.started) < refillFor
}

// refill reserves a further block of fences for c's run on the masters
// (quorum.Cluster.Reserve), so that a run no other agent waits for goes on
// past its first block, rather than end with a release and a new grant
// that its own next waiter makes anyway. The block becomes c's spare, and
// the record's block end, which the watchdog writes back to a master that
// lost the record.
func (a *Agent) refill(c *cohort) {
	block := a.cohortBlock()
	first, err := a.cluster.Reserve(a.runCtx, c.name, c.rh.Holder, block)
	a.mu.Lock()
	defer a.mu.Unlock()
	c.refilling = false
	if err != nil {
		c.refillFailed = true
		return
	}
	if a.cohortLocked(c.name) != c || c.wanted {
		return
	}
	c.spare = first
	c.record.Top = first + int64(block) - 1
	a.watchdog.SetRecord(c.rh, c.record)
}

// retagLoop writes c's current holder into its record on the masters, at
// most once per retagEvery, until the holder stops changing or the run ends.
func (a *Agent) retagLoop(c *cohort) {
	ctx := a.runCtx
	for {
		a.mu.Lock()
		if !c.retag || holderOf(c.rh) == nil || ctx.Err() != nil {
			c.retagging = false
			a.mu.Unlock()
			return
		}
		c.retag = false
		record := c.record
		a.mu.Unlock()
		a.cluster.Retag(ctx, c.name, c.rh.Holder, record)
		t := time.NewTimer(retagEvery)
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
}
