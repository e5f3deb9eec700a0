package agent

import (
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/lock-agent/lock-agent/protocol"
	"github.com/lock-agent/lock-agent/quorum"
)

// lastRound is what a failed round advises the next attempt for the same waiter.
type lastRound struct {
	w        *waiter
	bestSlot int
}

// waiterState is where a waiter is; it changes only under its queue's mu.
type waiterState int

const (
	queued    waiterState = iota
	granted               // the contender won it: the result is in done
	failed                // the contender gave up on it: the result is in done
	withdrawn             // its LOCK went away (timeout, CANCEL, session closed)
)

// queue is this agent's waiters for one name in arrival order. One contender
// goroutine works for its head against the masters, so an agent with many
// local waiters sends one attempt, and holds one subscription, per name.
type queue struct {
	name    string
	mu      queueMutex
	waiters []*waiter
	changed chan struct{}
	count   *atomic.Int64 // the agent's count of waiters in all queues
	// heard counts the rounds in which a majority of masters answered;
	// noQuorum is the last round's error if it was NO_QUORUM. A wait that
	// ends with no such round since it began answers NO_QUORUM, not BUSY.
	heard    uint64
	noQuorum error
	metrics  *metrics // keeps the waiters gauges in step with count
	// wantEntries (guarded by mu) says a waiter wants an entry (see
	// fair.go); enterAfter and enterFails, the contender's alone, back off
	// a failed round that makes them.
	wantEntries bool
	enterAfter  time.Time
	enterFails  int
	// yieldUntil is when the contender may try the masters again after a
	// run of local holders that another agent waited for (see cohort.go).
	yieldUntil time.Time
	// wantedAt is when another agent last said it waits for the name.
	wantedAt time.Time
}

// yieldLeft is how long the contender still stands back for another agent.
func (q *queue) yieldLeft(now time.Time) time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.yieldUntil.Sub(now)
}

// roundDone records whether a round for the head heard from a majority.
func (q *queue) roundDone(noQuorum error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.noQuorum = noQuorum
	if noQuorum == nil {
		q.heard++
	}
}

// timedOut is the answer of w, just withdrawn because its wait ran out.
func (q *queue) timedOut(w *waiter) result {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.heard == w.heard && q.noQuorum != nil {
		return result{err: quorumError(q.noQuorum)}
	}
	return result{err: quorum.ErrBusy}
}

func (q *queue) poke() {
	select {
	case q.changed <- struct{}{}:
	default:
	}
}

// joinLocked puts w at the back of the queue and counts it (see
// Agent.waiters). q.mu is held.
func (q *queue) joinLocked(w *waiter) {
	q.waiters = append(q.waiters, w)
	q.count.Add(1)
	q.metrics.mode(w.req.Mode).waiters.Inc()
}

// remove takes w out of the queue if it is still queued, giving it state st.
func (q *queue) remove(w *waiter, st waiterState) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if w.state != queued {
		return false
	}
	w.state = st
	for i, o := range q.waiters {
		if o == w {
			q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
			break
		}
	}
	q.count.Add(-1)
	q.metrics.mode(w.req.Mode).waiters.Dec()
	return true
}

// enqueue puts w at the back of its name's queue, starting the name's
// contender if it has none, and arms its wait= timer. A wait=0 LOCK behind
// other local waiters is not queued but busy (the caller ends it): the name
// is contended and it may not wait.
func (a *Agent) enqueue(w *waiter) (busy bool, _ error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopping {
		return false, protocol.Errorf(protocol.ErrShuttingDown, "agent is stopping")
	}
	if lim := a.limits().MaxWaiters; a.waiters.Load() >= int64(lim) {
		return false, protocol.Errorf(protocol.ErrLimit, "agent has %d waiting LOCKs (max_waiters)", lim)
	}
	name := w.req.Names[0]
	q := a.queues[name]
	start := q == nil
	if start {
		q = &queue{name: name, changed: make(chan struct{}, 1), count: &a.waiters, metrics: a.metrics}
		a.queues[name] = q
	}
	q.mu.Lock()
	if w.req.Wait == 0 && len(q.waiters) > 0 {
		q.mu.Unlock()
		w.state = failed
		return true, nil
	}
	w.q = q
	w.heard = q.heard
	if w.req.Fair && w.req.Wait != 0 && len(q.waiters) > 0 {
		// Behind this agent's waiters: the name is contended, so it
		// takes its place in the masters' queue at once.
		w.wantsEntry = true
		q.wantEntries = true
		defer q.poke()
	}
	q.joinLocked(w)
	if w.req.Wait > 0 {
		w.timer = time.AfterFunc(w.req.Wait, func() { a.expire(w) })
	}
	q.mu.Unlock()
	if start {
		go a.contend(q)
	}
	return false, nil
}

func (a *Agent) withdraw(w *waiter) bool {
	if w.q == nil || !w.q.remove(w, withdrawn) {
		return false
	}
	a.leave(w)
	w.q.poke()
	return true
}

// head returns the first waiter, or nil after retiring an empty queue.
func (a *Agent) head(q *queue) *waiter {
	a.mu.Lock()
	defer a.mu.Unlock()
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.waiters) == 0 {
		delete(a.queues, q.name)
		return nil
	}
	return q.waiters[0]
}

// stuckRetry is the least the back-off of a waiter that keeps failing grows
// to, whatever retry_max is: such a waiter tries at most 1/(stuckRetry/2),
// about 20 times a second.
const stuckRetry = 100 * time.Millisecond

// backoff is the jittered wait before the next attempt after fails
// consecutive failed ones: it doubles from retry_min up to
// max(retry_max, stuckRetry), and is drawn from its upper half.
func (a *Agent) backoff(fails int) time.Duration {
	ceiling := a.backoffCeiling()
	d := max(a.cfg.Lock.RetryMin, time.Millisecond)
	for i := 1; i < fails && d < ceiling; i++ {
		d *= 2
	}
	d = min(d, ceiling)
	return d/2 + rand.N(d/2+1)
}

func (a *Agent) backoffCeiling() time.Duration { return max(a.cfg.Lock.RetryMax, stuckRetry) }

// contend works for the queue's head until the queue is empty. While the
// name is held elsewhere it sleeps until a release message, its timer
// fallback (the holder's remaining lease: PUBLISH does not fire on expiry),
// or a change in the queue. Attempts that cannot succeed yet back off
// instead of spinning:
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
func (a *Agent) contend(q *queue) {
	var watch *quorum.Watch
	defer func() {
		if watch != nil {
			watch.Close()
		}
	}()
	ctx := a.runCtx
	var (
		fails     int        // failed attempts since the last grant or quiet spell that a split vote, no quorum or a wake-up caused
		woken     bool       // the coming attempt follows a wake-up
		outvoted  bool       // the last attempt split with a majority held (see below)
		notBefore time.Time  // no attempt before this
		last      *lastRound // the last failed round's advice
	)
	for {
		w := a.head(q)
		if w == nil {
			return
		}
		if w.sess.reenterQueued(w) {
			continue
		}
		if w.after != nil {
			select {
			case <-w.after:
			case <-ctx.Done():
			}
			w.after = nil
			continue // the release may have passed the name to w: look again
		}
		if ctx.Err() != nil {
			a.finish(q, w, result{err: protocol.Errorf(protocol.ErrShuttingDown, "agent is stopping")})
			continue
		}
		if cohortable(w.req) && a.inCohort(q.name) {
			// This agent holds the name in a run of local holders: w is
			// passed the name when the holder lets go, or tries the masters
			// once the run ended (its release pokes the queue).
			if w.req.Wait == 0 {
				a.finish(q, w, result{err: quorum.ErrBusy})
				continue
			}
			if watch == nil {
				watch = a.cluster.Watch(ctx, q.name) // to hear that other agents wait
			}
			select {
			case <-q.changed:
			case <-watch.Wanted():
				a.cohortWanted(q)
			case <-ctx.Done():
			}
			continue
		}
		if d := q.yieldLeft(a.clock.Now()); d > 0 {
			notBefore = a.clock.Now().Add(d)
			continue
		}
		a.enter(ctx, q)
		if d := notBefore.Sub(a.clock.Now()); d > 0 {
			// Backing off: release messages do not cut it short. A change
			// in the queue only makes the loop look at its head again.
			t := a.clock.NewTimer(d)
			select {
			case <-t.C():
			case <-q.changed:
			case <-ctx.Done():
			}
			t.Stop()
			continue
		}
		if watch != nil {
			// This attempt sees every release, and subscription, so far.
			select {
			case <-watch.C():
			default:
			}
			select {
			case <-watch.Recheck():
			default:
			}
		}
		lease := a.cfg.Lock.Lease
		if w.req.TTL > 0 {
			lease = w.req.TTL
		}
		holder := a.holderID(w.sess.id, w.req.Owner)
		slot := 0
		if last != nil && last.w == w {
			slot = last.bestSlot // after a split, ask for the slot most masters granted
		}
		who := w.who
		who.SinceMilli = time.Now().UnixMilli() // when this attempt (if it wins) began holding
		claim := claimOf(w.req)
		claim.Slot = slot
		q.mu.Lock()
		entry := w.entry
		q.mu.Unlock()
		g, err := a.cluster.Acquire(ctx, quorum.AcquireRequest{Name: q.name, Holder: holder, Lease: lease,
			Claim: claim, Who: who, Entry: entry, FenceBlock: a.fenceBlock(q, w)})
		wasWoken := woken
		woken = false
		if err == nil {
			q.roundDone(nil)
			a.grant(q, w, holder, g)
			fails, outvoted = 0, false
			continue
		}
		var round *quorum.RoundError
		errors.As(err, &round)
		if round != nil {
			last = &lastRound{w: w, bestSlot: round.BestSlot}
		}
		if errors.Is(err, quorum.ErrConflict) {
			// Held for another kind of claim: waiting would not help.
			a.finish(q, w, result{err: protocol.Errorf(protocol.ErrConflict, "%s is held with limit=%d", q.name, round.HeldLimit)})
			continue
		}
		if !errors.Is(err, quorum.ErrBusy) {
			if w.req.Wait == 0 || round == nil {
				a.finish(q, w, result{err: quorumError(err)})
				continue
			}
			// A slow or unreachable majority may be back soon: the waits
			// of the queue go on, and end as NO_QUORUM if it is not.
			q.roundDone(err)
			fails++
			notBefore = a.clock.Now().Add(a.backoff(fails))
			continue
		}
		q.roundDone(nil)
		if w.req.Wait == 0 {
			a.finish(q, w, result{err: quorum.ErrBusy})
			continue
		}
		if a.wantEntry(q, w, round) {
			continue // try again once it has its place in the queue
		}
		if watch == nil {
			// Subscribe, then try again at once: a release between the
			// first attempt and the subscription would otherwise be missed.
			watch = a.cluster.Watch(ctx, q.name)
			continue
		}
		split := round.Yes > 0
		switch {
		case split && round.RetryAfter > 0 && round.Busy >= a.cluster.Quorum() && !(outvoted && wasWoken):
			// Held on a majority: only a master that missed the holder's
			// grant voted for w. Wait for the holder's release below, as
			// for a busy answer (the release message wakes it at once).
			// Outvoted again right after a message woke it, w backs off:
			// contenders that split among themselves must not try again
			// in lock step on each other's give-backs.
			outvoted = true
		case split || round.RetryAfter <= 0:
			// A split vote, or a holder with no lease: back off with jitter
			// so that contending agents do not split again in lock step.
			fails++
			notBefore = a.clock.Now().Add(a.backoff(fails))
			continue
		default:
			outvoted = false
			if wasWoken {
				fails++
			}
		}
		// Tell an agent that passes the name among its local holders that
		// it is wanted here (see cohort.go).
		a.cluster.Wanted(q.name)
		parked := a.clock.Now()
		t := a.clock.NewTimer(min(time.Duration(round.RetryAfter)*time.Millisecond, a.cfg.Lock.Lease))
		select {
		case <-watch.C():
			woken = true
		case <-q.changed:
			// A waiter that only wants an entry is not a wake-up: the
			// attempt after it says nothing about contention.
			woken = !q.entriesWanted()
		case <-watch.Recheck():
			// A subscription confirmed: look again, as for the timer.
		case <-t.C():
		case <-ctx.Done():
		}
		t.Stop()
		if !woken {
			continue
		}
		if a.clock.Now().Sub(parked) >= a.backoffCeiling() {
			fails = 0 // a quiet spell: this wake-up is likely a real release
		}
		if fails > 0 {
			notBefore = a.clock.Now().Add(a.backoff(fails))
		}
	}
}

// grant hands a won name to w, or gives it back if w went away meanwhile.
func (a *Agent) grant(q *queue, w *waiter, holder string, g quorum.Grant) {
	if !q.remove(w, granted) {
		a.releaseAsync(q.name, holder)
		return
	}
	defer a.leave(w) // once the hold is in place
	r, err := w.sess.install(w, holder, g)
	if err != nil {
		a.releaseAsync(q.name, holder)
		w.end(result{err: err})
		return
	}
	r.validity = g.Deadline.Sub(a.clock.Now())
	w.end(r)
}

// reenterQueued grants w as a re-entry when its session+owner came to hold
// the name while w waited (two pipelined LOCKs of one owner).
func (s *session) reenterQueued(w *waiter) bool {
	s.mu.Lock()
	h := s.holds[holdKey{w.req.Names[0], w.req.Owner}]
	if h == nil {
		s.mu.Unlock()
		return false
	}
	v, ok := s.a.watchdog.Validity(h.rh)
	if !ok || v <= 0 || !w.q.remove(w, granted) {
		s.mu.Unlock()
		return false
	}
	var r result
	if err := h.reenter(w.req); err != nil {
		r = result{err: err}
	} else {
		r = h.snapshot(v)
	}
	s.dropWaitLocked(w)
	s.mu.Unlock()
	s.a.leave(w)
	w.end(r)
	return true
}

func (a *Agent) finish(q *queue, w *waiter, r result) {
	if !q.remove(w, failed) {
		return
	}
	a.leave(w)
	w.end(r)
}
