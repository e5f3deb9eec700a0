package agent

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/lock-agent/lock-agent/internal/lockorder"
	"github.com/lock-agent/lock-agent/protocol"
	"github.com/lock-agent/lock-agent/quorum"
)

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
// local waiters sends one attempt, and holds one subscription, per name
// (see contender.go).
type queue struct {
	name    string
	mu      lockorder.Mutex[lockorder.Queue]
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
	// contended says an attempt for a waiter found the name held: the
	// waiters are recorded on the masters (rec) from then on (see
	// waiting.go). Guarded by mu.
	contended bool
	rec       *waitRecord
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
	q.kickWaitingLocked()
	q.count.Add(1)
	q.metrics.mode(w.req.Mode).Waiters.Inc()
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
	q.kickWaitingLocked()
	q.count.Add(-1)
	q.metrics.mode(w.req.Mode).Waiters.Dec()
	return true
}

// beginAttempt marks a round for w in flight, unless w left the queue
// meanwhile (then no round may be made for it: its answer is not held
// back for one). Only the contender calls it.
func (q *queue) beginAttempt(w *waiter) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if w.state != queued {
		return false
	}
	w.attempting = true
	return true
}

// endAttempt says w's round is settled: an answer held back for it (see
// waiter.endWithdrawn) goes out now.
func (q *queue) endAttempt(w *waiter) {
	q.mu.Lock()
	held := w.held
	w.attempting, w.held = false, nil
	q.mu.Unlock()
	if held != nil {
		w.end(*held)
	}
}

// enqueue puts w at the back of its name's queue, starting the name's
// contender if it has none, and arms its wait= timer. A wait=0 LOCK behind
// other local waiters is not queued but busy (the caller ends it): the name
// is contended and it may not wait.
func (a *Agent) enqueue(w *waiter) (busy bool, _ error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopping {
		return false, errAgentStopping
	}
	if lim := a.limits().MaxWaiters; a.waiters.Load() >= int64(lim) {
		return false, protocol.Errorf(protocol.ErrLimit, "agent has %d waiting LOCKs (max_waiters)", lim)
	}
	n := a.nameLocked(w.req.Names[0])
	q := n.queue
	start := q == nil
	if start {
		q = &queue{name: n.key, changed: make(chan struct{}, 1), count: &a.waiters, metrics: a.metrics}
		n.queue = q
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
		w.timer = a.clock.AfterFunc(w.req.Wait, func() { a.expire(w) })
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
		if n := a.names[q.name]; n != nil && n.queue == q {
			n.queue = nil
			a.tidyLocked(n)
		}
		return nil
	}
	return q.waiters[0]
}

// backoff is the jittered wait before the next attempt after fails
// consecutive failed ones (see retryPolicy.after).
func (a *Agent) backoff(fails int) time.Duration {
	return a.retryPolicy().after(fails, rand.Float64())
}

// grant hands a won name to w, or gives it back if w went away meanwhile:
// at once, since w's answer waits for it (see waiter.endWithdrawn).
func (a *Agent) grant(q *queue, w *waiter, holder string, g quorum.Grant) {
	if !q.remove(w, granted) {
		a.release(context.Background(), q.name, holder, false)
		return
	}
	defer a.leave(w) // once the hold is in place
	r, err := w.sess.install(w, holder, g)
	if err != nil {
		a.releaseAsync(q.name, holder)
		w.end(result{err: err})
		return
	}
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
