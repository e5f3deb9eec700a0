package locks

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/lock-agent/lock-agent/protocol"
	"github.com/lock-agent/lock-agent/quorum"
)

// The contender of a name works for the head of this agent's queue of
// waiters for it (see queue) against the masters, until the queue is
// empty. While the name is held elsewhere it sleeps until a release
// message, its timer fallback (until a majority may be free,
// quorum.Refusal.RetryAfter: rules.FreeOnMajorityIn; PUBLISH does not fire
// on expiry), or a change in the queue. Attempts that cannot
// succeed yet back off instead of spinning:
//   - a split vote (some masters granted, the round failed: its own release
//     publishes) waits a jittered back-off that release messages do not cut,
//     but for one in which a majority answered held: a master that missed
//     the holder's grant voted for the waiter, and no attempt can win before
//     a release, so the first such split waits for one as a busy answer does;
//   - a round that did not reach a majority (NO_QUORUM) backs off the same
//     way, and keeps trying until the head's wait ends;
//   - a release message is acted on at once, unless attempts have been
//     failing (split votes, or attempts that earlier messages caused) with
//     no quiet spell since: then it waits a back-off first. Messages that
//     free nothing the waiter could get must not drive it.
//
// What to do after a round is decided by contender.next, and what a wake-up
// changes by contender.woke: pure functions of the contender's state and
// what happened, table-tested in contender_internal_test.go. The goroutine
// around them (contending) does the I/O: the rounds, the grants and
// answers, and the waits.

// contender is what a name's contender remembers from one round to the
// next. Its zero value is a contender that has not tried yet.
type contender struct {
	fails     int       // failed attempts since the last grant or quiet spell that a split vote, no quorum or a wake-up caused
	woken     bool      // the coming attempt follows a wake-up
	outvoted  bool      // the last attempt split with a majority held (see next)
	notBefore time.Time // no attempt before this
	// slotOf is the waiter the last refused round was for, and slot the
	// slot most masters granted in it: the one that waiter asks for next.
	slotOf *Waiter
	slot   int
	// cachedFor is the wait=0 head that found only other agents' cached
	// records in its way, and cachedUntil the end of its bounded wait for
	// their release (see cache.go).
	cachedFor   *Waiter
	cachedUntil time.Time
	// heldFor is the wait=0 head for which a caching agent said, while it
	// waited, that a client of its holds the name (see quorum.Cluster.Held):
	// the round after that answers BUSY if the name is still in its way.
	heldFor *Waiter
}

// slotFor is the slot an attempt for w asks for: after a split, the slot
// most masters granted; else 0 (any).
func (c contender) slotFor(w *Waiter) int {
	if c.slotOf == w {
		return c.slot
	}
	return 0
}

// roundOutcome is how one attempt on the masters ended.
type roundOutcome struct {
	err     error           // nil: the round won the name
	refusal *quorum.Refusal // what the masters answered; nil if it won, or failed without a round
}

// outcomeOf is how an Acquire ended: won, refused by the masters (err is
// the refusal's, for the answer), or failed without a round.
func outcomeOf(ref *quorum.Refusal, err error) roundOutcome {
	if ref != nil {
		return roundOutcome{err: ref.Err(), refusal: ref}
	}
	return roundOutcome{err: err}
}

// retryPolicy is the back-off between failed attempts.
type retryPolicy struct {
	min     time.Duration // retry_min
	ceiling time.Duration // max(retry_max, stuckRetry); also the quiet spell that forgets failures
}

// stuckRetry is the least the back-off of a waiter that keeps failing grows
// to, whatever retry_max is: such a waiter tries at most 1/(stuckRetry/2),
// about 20 times a second.
const stuckRetry = 100 * time.Millisecond

func (a *Manager) retryPolicy() retryPolicy {
	return retryPolicy{min: a.cfg.RetryMin, ceiling: max(a.cfg.RetryMax, stuckRetry)}
}

// after is the jittered wait before the next attempt after fails
// consecutive failed ones: it doubles from retry_min up to the ceiling, and
// is drawn from its upper half by jitter, a uniform draw in [0, 1).
func (p retryPolicy) after(fails int, jitter float64) time.Duration {
	d := max(p.min, time.Millisecond)
	for i := 1; i < fails && d < p.ceiling; i++ {
		d *= 2
	}
	d = min(d, p.ceiling)
	return d/2 + time.Duration(jitter*float64(d/2+1))
}

// roundFacts is what the decision after a round knows besides the
// contender's state and the round's outcome: the head's request, the
// contender's subscription, the configuration, and now.
type roundFacts struct {
	now      time.Time
	jitter   float64 // a uniform draw in [0, 1) for a back-off
	name     string
	waiter   *Waiter // the head the round was for
	wait0    bool    // its LOCK may not wait (wait=0)
	fair     bool    // fair=true
	writer   bool    // an exclusive lock (limit 1)
	hasEntry bool    // it has, or is getting, a place in the masters' queue (or it left the queue)
	watching bool    // the contender is subscribed to the name's releases
	quorum   int     // how many masters make a majority
	lease    time.Duration
	retry    retryPolicy
	// ownCache says this agent keeps the name cached (lent to a local
	// holder): no other agent's release is to be waited for.
	ownCache bool
	// cacheWait bounds how long a waiting head parks on records other
	// agents keep cached before it says again that it waits:
	// 4×master_timeout.
	cacheWait time.Duration
	// tryWait bounds how long a wait=0 head waits for other agents to give
	// up the records they keep as caches, or to say that a client holds
	// them: 10×master_timeout, the longest a round may take on a loaded
	// host (see quorum's roundTimeout), for the keeping agent needs a
	// subscription, a round to read the records' wanted mark, and a
	// release.
	tryWait time.Duration
}

// actionKind is what the contender does after a round.
type actionKind int

const (
	grantHead   actionKind = iota // the round won: hand the name to the head
	answerHead                    // end the head's wait with action.answer
	retry                         // try again, not before contender.notBefore
	enterQueue                    // mark the head as wanting a place in the masters' queue, then try again
	subscribe                     // subscribe to the name's releases, then try again at once
	park                          // say the name is wanted here, and wait for a release, a change in the queue, or action.wake
	awaitCached                   // wait=0: say the name is wanted here (if action.sayWanted), and wait up to action.wake for a release
)

// action is the decision after a round.
type action struct {
	kind   actionKind
	answer error // for answerHead
	// noted says the queue notes the round (see queue.heard): one that
	// heard from a majority, or one that did not (noQuorum, its error).
	noted    bool
	noQuorum error
	wake     time.Duration // for park: the fallback wake-up, until a majority may be free (quorum.Refusal.RetryAfter: rules.FreeOnMajorityIn); for awaitCached: the bound
	// sayWanted, for awaitCached, says the keeping agents are to be told
	// that the head waits (again, at most once per wantedEvery: see
	// tellWanted).
	sayWanted bool
}

// next decides what follows a round for the head: the contender's next
// state and what to do. It reads no clock and does no I/O.
func (c contender) next(out roundOutcome, f roundFacts) (contender, action) {
	wasWoken := c.woken
	c.woken = false
	if out.err == nil {
		c.fails, c.outvoted = 0, false
		return c, action{kind: grantHead, noted: true}
	}
	r := out.refusal
	if r == nil {
		return c, action{kind: answerHead, answer: QuorumError(out.err)}
	}
	c.slotOf, c.slot = f.waiter, r.BestSlot
	switch {
	case errors.Is(r.Kind, quorum.ErrConflict):
		// Held for another kind of claim: waiting would not help.
		return c, action{kind: answerHead, answer: protocol.Errorf(protocol.ErrConflict, "%s is held with limit=%d", f.name, r.HeldLimit)}
	case errors.Is(r.Kind, quorum.ErrSettings):
		// A majority records other settings: this agent may not grant,
		// however long it waits.
		return c, action{kind: answerHead, answer: QuorumError(out.err)}
	case !errors.Is(r.Kind, quorum.ErrBusy) && f.wait0:
		return c, action{kind: answerHead, answer: QuorumError(out.err)}
	case !errors.Is(r.Kind, quorum.ErrBusy):
		// A slow or unreachable majority may be back soon: the waits of
		// the queue go on, and end as NO_QUORUM if it is not.
		c.fails++
		c.notBefore = f.now.Add(f.retry.after(c.fails, f.jitter))
		return c, action{kind: retry, noted: true, noQuorum: out.err}
	}
	return c.busy(*r, f, wasWoken)
}

// busy decides what follows a round the masters answered BUSY; wasWoken
// says the round followed a wake-up.
func (c contender) busy(r quorum.Refusal, f roundFacts, wasWoken bool) (contender, action) {
	if f.wait0 {
		return c.busyNow(r, f)
	}
	heard := action{noted: true}
	switch {
	case !f.hasEntry && (f.fair || f.writer && r.OnlyReaders):
		// A fair LOCK, or a writer only readers keep out, takes its
		// place in the masters' queue, then tries again (see waiters.go).
		heard.kind = enterQueue
		return c, heard
	case !f.watching:
		// Subscribe, then try again at once: a release between this
		// attempt and the subscription would otherwise be missed.
		heard.kind = subscribe
		return c, heard
	}
	split := r.Yes > 0
	switch {
	case split && r.RetryAfter > 0 && r.Busy >= f.quorum && !(c.outvoted && wasWoken):
		// Held on a majority: only a master that missed the holder's
		// grant voted for the head. Wait for the holder's release, as for
		// a busy answer (the release message wakes it at once). Outvoted
		// again right after a message woke it, it backs off: contenders
		// that split among themselves must not try again in lock step on
		// each other's give-backs.
		c.outvoted = true
	case split || r.RetryAfter <= 0:
		// A split vote, or a holder with no lease: back off with jitter so
		// that contending agents do not split again in lock step.
		c.fails++
		c.notBefore = f.now.Add(f.retry.after(c.fails, f.jitter))
		heard.kind = retry
		return c, heard
	default:
		c.outvoted = false
		if wasWoken {
			c.fails++ // the message that woke it freed nothing it could get
		}
	}
	heard.kind, heard.wake = park, min(r.RetryAfter, f.lease)
	if r.OnlyCached {
		// Its agents give the name up once they hear that it is wanted
		// (park says so); should they miss it, the waiter says so again.
		heard.wake = min(heard.wake, f.cacheWait)
	}
	return c, heard
}

// busyNow decides what follows a BUSY round for a wait=0 head: BUSY,
// unless only records other agents keep as caches were in its way, marked
// cached or not (the mark may be late: see quorum.Refusal.OnlyKept) and no
// client of theirs was said to hold the name.
func (c contender) busyNow(r quorum.Refusal, f roundFacts) (contender, action) {
	heard := action{noted: true}
	kept := (r.OnlyCached || r.OnlyKept) && !f.ownCache && c.heldFor != f.waiter
	switch {
	case kept && (c.cachedFor != f.waiter || f.now.Before(c.cachedUntil)):
		// No client holds the name, or one of the keeping agent's does:
		// that agent gives it up, or says that a client holds it, once
		// told that it is wanted (see cache.go). A wait=0 LOCK waits for
		// that, and that alone, a bounded time, and says it again, and
		// tries again, every wantedEvery: a word the keeping agent missed
		// (it was not listening yet) is not the end of it.
		if c.cachedFor != f.waiter {
			c.cachedFor, c.cachedUntil = f.waiter, f.now.Add(f.tryWait)
		}
		heard.sayWanted = true
		heard.kind, heard.wake = awaitCached, min(c.cachedUntil.Sub(f.now), wantedEvery)
	case !f.ownCache && c.heldFor != f.waiter && c.cachedFor == f.waiter && f.now.Before(c.cachedUntil):
		// Cached records were in its way a moment ago: what is in its way
		// now may be their release on its way, or a give-back of its own
		// earlier attempt. It tries again soon, until the bound.
		heard.kind, heard.wake = awaitCached, min(c.cachedUntil.Sub(f.now), f.retry.min)
	default:
		heard.kind, heard.answer = answerHead, quorum.ErrBusy
	}
	return c, heard
}

// wake is how a park ended.
type wake struct {
	// woken says a release message, or a change in the queue other than
	// a waiter that only wants an entry, ended it; not the timer, a
	// confirmed subscription, or the agent stopping.
	woken  bool
	parked time.Duration // how long it lasted
	now    time.Time
	jitter float64 // a uniform draw in [0, 1) for a back-off
	retry  retryPolicy
}

// woke is the contender's state after a park ended as w says. A wake-up
// after failed attempts backs off first, unless the park was a quiet
// spell (as long as the back-off's ceiling): then it is likely a real
// release, and the failures are forgotten. It reads no clock.
func (c contender) woke(w wake) contender {
	c.woken = w.woken
	if !w.woken {
		return c
	}
	if w.parked >= w.retry.ceiling {
		c.fails = 0
	}
	if c.fails > 0 {
		c.notBefore = w.now.Add(w.retry.after(c.fails, w.jitter))
	}
	return c
}

// contending is a name's contender goroutine: the I/O around contender's
// decisions. Only that goroutine uses it.
type contending struct {
	a      *Manager
	q      *queue
	ctx    context.Context
	watch  *quorum.Watch // the name's releases, once subscribed
	policy roundFacts    // the facts that do not change: quorum, lease, retry
	state  contender
}

// contend works for q's head until q is empty (see the top of this file).
func (a *Manager) contend(q *queue) {
	r := &contending{a: a, q: q, ctx: a.runCtx,
		policy: roundFacts{quorum: a.cluster.Quorum(), lease: a.cfg.Lease, retry: a.retryPolicy(),
			cacheWait: 4 * a.cfg.MasterTimeout, tryWait: 10 * a.cfg.MasterTimeout}}
	defer func() {
		if r.watch != nil {
			r.watch.Close()
		}
	}()
	for {
		w := a.head(q)
		if w == nil {
			return
		}
		if r.ready(w) {
			r.attempt(w)
		}
	}
}

// ready does what comes before a round for the head w, and says whether
// the round may go ahead now; if not, the loop looks at the head again.
func (r *contending) ready(w *Waiter) bool {
	a, q, ctx := r.a, r.q, r.ctx
	switch {
	case r.a.reenterQueued(w):
		return false
	case w.after != nil:
		select {
		case <-w.after:
		case <-ctx.Done():
		}
		w.after = nil
		return false // the release may have passed the name to w: look again
	case ctx.Err() != nil:
		a.finish(q, w, Result{Err: ErrAgentStopping})
		return false
	case r.awaitLostRelease(w):
		return false // released: look again
	case lendable(w.req, lendRun) && a.lateRun(q, w): // a run, or one being made
		r.awaitCohort(w)
		return false
	}
	if d := q.yieldLeft(a.clock.Now()); d > 0 {
		// Standing back for another agent's waiter (see cohort.go).
		r.state.notBefore = a.clock.Now().Add(d)
		r.backOff(d)
		return false
	}
	a.enter(ctx, q)
	if d := r.state.notBefore.Sub(a.clock.Now()); d > 0 {
		r.backOff(d)
		return false
	}
	if r.watch != nil {
		// This attempt sees every release, and subscription, so far.
		select {
		case <-r.watch.C():
		default:
		}
		select {
		case <-r.watch.Recheck():
		default:
		}
		select { // a word for an earlier attempt
		case <-r.watch.Held():
		default:
		}
	}
	return true
}

// awaitCohort waits while this agent holds the name in a run of local
// holders: w is passed the name when the holder lets go, or tries the
// masters once the run ended (its release pokes the queue).
func (r *contending) awaitCohort(w *Waiter) {
	if w.req.Wait == 0 {
		r.a.finish(r.q, w, Result{Err: quorum.ErrBusy})
		return
	}
	r.subscribe() // to hear that other agents wait
	r.a.startsWaiting(r.q)
	select {
	case <-r.q.changed:
	case <-r.watch.Wanted():
		r.a.cohortWanted(r.q)
	case <-r.ctx.Done():
	}
}

// awaitLostRelease waits while this agent's lost holds of the name are
// yet to be released in the masters (see lostRelease): its client may
// answer the LOST with this very LOCK. It waits until the last release was
// answered, but no longer than a try past when the latest is due, and a
// LOCK that does not wait (wait=0) no longer than a try in all (a revoked
// hold's release waits for its client to read the LOST). false: the round
// may go ahead.
func (r *contending) awaitLostRelease(w *Waiter) bool {
	a := r.a
	a.mu.Lock()
	var lr lostRelease
	if n := a.names[r.q.name]; n != nil && n.lostRelease != nil {
		lr = *n.lostRelease
	}
	a.mu.Unlock()
	if lr.released == nil {
		return false
	}
	now, until := a.clock.Now(), lr.due
	if w.req.Wait == 0 {
		if w.releaseWaitFrom.IsZero() {
			w.releaseWaitFrom = now
		}
		if w.releaseWaitFrom.Before(until) { // from its first wait, however often the loop looks again
			until = w.releaseWaitFrom
		}
	}
	d := until.Sub(now) + r.policy.tryWait
	if d <= 0 {
		return false
	}
	t := a.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-lr.released:
	case <-r.q.changed: // withdrawn, or another head: look again
	case <-t.C():
		return false
	case <-r.ctx.Done():
	}
	return true
}

// backOff waits d: release messages do not cut it short. A change in the
// queue only makes the loop look at its head again.
func (r *contending) backOff(d time.Duration) {
	t := r.a.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
	case <-r.q.changed:
	case <-r.ctx.Done():
	}
}

func (r *contending) subscribe() {
	if r.watch == nil {
		r.watch = r.a.cluster.Watch(r.ctx, r.q.name)
	}
}

// attempt makes one round on the masters for the head w, and does what
// contender.next decides after it.
func (r *contending) attempt(w *Waiter) {
	a, q := r.a, r.q
	if !q.beginAttempt(w) {
		return // withdrawn since the loop read the head
	}
	holder := a.holderID(w.sess.SessionID(), w.req.Owner)
	g, ref, err := a.cluster.Acquire(r.ctx, r.request(w, holder))
	next, act := r.state.next(outcomeOf(ref, err), r.facts(w))
	r.state = next
	if ref != nil && errors.Is(ref.Kind, quorum.ErrBusy) && w.req.Wait != 0 {
		a.saysWanted(q, w)
	}
	if act.noted {
		q.roundDone(act.noQuorum)
	}
	if act.kind == grantHead {
		a.grant(q, w, holder, g)
	}
	q.endAttempt(w)
	switch act.kind {
	case answerHead:
		a.finish(q, w, Result{Err: act.answer})
	case enterQueue:
		q.markEntry(w)
	case subscribe:
		r.subscribe()
	case park:
		r.park(w, act.wake)
	case awaitCached:
		r.awaitCached(w, act)
	case retry: // at the next turn, once contender.notBefore has passed
	}
}

// request is the round for the head w under the fresh holder id.
func (r *contending) request(w *Waiter, holder string) quorum.AcquireRequest {
	a, q := r.a, r.q
	who := w.who
	who.SinceMilli = time.Now().UnixMilli() // when this attempt (if it wins) began holding
	claim := claimOf(w.req)
	claim.Slot = r.state.slotFor(w)
	q.mu.Lock()
	entry := w.entry
	q.mu.Unlock()
	return quorum.AcquireRequest{Name: q.name, Holder: holder, Lease: a.cfg.Lease,
		Claim: claim, Who: who, Entry: entry, FenceBlock: a.fenceBlock(q, w), Tail: tailOf(w.req)}
}

// facts is what the decision after a round for the head w knows.
func (r *contending) facts(w *Waiter) roundFacts {
	q := r.q
	q.mu.Lock()
	hasEntry := w.entry != nil || w.wantsEntry || w.state != queued
	q.mu.Unlock()
	f := r.policy
	f.now, f.jitter, f.name, f.waiter = r.a.clock.Now(), rand.Float64(), q.name, w
	f.wait0, f.fair, f.writer = w.req.Wait == 0, w.req.Fair, w.req.Mode == protocol.Exclusive && limitOf(w.req) == 1
	f.hasEntry, f.watching = hasEntry, r.watch != nil
	f.ownCache = f.wait0 && r.a.cachesName(q.name) // only a wait=0 head asks
	return f
}

// park tells an agent that passes the name among its local holders, or
// whose holder asked to hear of waiters, that w (the head) and the waiters
// behind it want the name here (see cohort.go, watch.go), then waits for a release message, a
// change in the queue, or the holder's lease to end (fallback).
func (r *contending) park(w *Waiter, fallback time.Duration) {
	a, q := r.a, r.q
	a.tellWanted(q, w)
	a.waiterWants(w, true) // and this agent's holders: a hold granted since w's first attempt has not heard of it
	parked := a.clock.Now()
	t := a.clock.NewTimer(fallback)
	woken := false
	select {
	case <-r.watch.C():
		woken = true
	case <-q.changed:
		// A waiter that only wants an entry is not a wake-up: the
		// attempt after it says nothing about contention.
		woken = !q.entriesWanted()
	case <-r.watch.Recheck():
		// A subscription confirmed: look again, as for the timer.
	case <-t.C():
	case <-r.ctx.Done():
	}
	t.Stop()
	now := a.clock.Now()
	r.state = r.state.woke(wake{woken: woken, parked: now.Sub(parked), now: now, jitter: rand.Float64(), retry: r.policy.retry})
}

// awaitCached tells the agents that cache q's name that w, a wait=0 head,
// wants it (if act says so), then waits up to act.wake for a release: the
// round after it finds the name free, or waits again until the bound (see
// contender.busy). Not yet subscribed, it subscribes first, says so once a
// master confirmed it, and tries again at once: the caching agent may
// have given the name up before that, when it read that the try's round
// marked its record wanted (see keepCache), and that release was not
// heard. Subscribed earlier, a confirmation (a master back) ends the
// wait too: a release while it was away was missed. A word that a client
// of the caching agent holds the name ends it as well, and the round
// after it answers BUSY.
func (r *contending) awaitCached(w *Waiter, act action) {
	a, q := r.a, r.q
	t := a.clock.NewTimer(act.wake)
	defer t.Stop()
	if r.watch == nil && act.sayWanted {
		r.subscribe()
		select {
		case <-r.watch.Recheck():
			a.tellWanted(q, w)
		case <-r.watch.C():
		case <-q.changed:
		case <-t.C():
		case <-r.ctx.Done():
		}
		return
	}
	r.subscribe()
	if act.sayWanted {
		a.tellWanted(q, w)
	}
	select {
	case <-r.watch.C():
	case <-r.watch.Held():
		r.state.heldFor = w
	case <-r.watch.Recheck():
	case <-q.changed: // CANCEL, or the session closing: look at the head again
	case <-t.C():
	case <-r.ctx.Done():
	}
}

// markEntry marks w, the head of q that the masters answered BUSY, as
// wanting a place in the masters' queue: the next turn makes it (see
// waiters.go).
func (q *queue) markEntry(w *Waiter) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if w.entry != nil || w.wantsEntry || w.state != queued {
		return
	}
	w.wantsEntry = true
	q.wantEntries = true
}
