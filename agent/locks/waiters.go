package locks

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/lock-agent/lock-agent/internal/lockorder"
	"github.com/lock-agent/lock-agent/protocol"
	"github.com/lock-agent/lock-agent/quorum"
	"github.com/lock-agent/lock-agent/quorum/clock"
	"github.com/lock-agent/lock-agent/quorum/rules"
	"github.com/lock-agent/lock-agent/renewal"
)

// Who waits for a name on this agent: a LOCK's wait (waiter) and its
// outcome (result); the name's queue of waiters in arrival order, for whose
// head one contender tries the masters (contender.go); a waiter's place in
// the masters' fair queue (its entry); and the waiting record that WHO on
// any agent shows.

// Waiter is one LOCK waiting in its name's queue.
type Waiter struct {
	sess  Client
	tag   string
	req   protocol.Lock
	q     *queue
	who   quorum.Who // recorded with the hold; SinceMilli is set per attempt
	state waiterState
	// done, for a wait of a multi-lock (whose goroutine awaits each name in
	// turn), receives its result; a LOCK of one name has none and is
	// answered by whoever ends its wait (see end).
	done chan Result
	// timer ends the wait when wait= runs out; set under the queue's mu.
	timer clock.Timer
	// after, if not nil, is closed once this session's release of the name
	// landed: the contender tries the masters for w only then.
	after <-chan struct{}
	// heard is the queue's heard when w joined it (see queue.heard).
	heard uint64
	// joined is when its LOCK arrived, for lock_agent_wait_seconds.
	joined time.Time
	// reused says this agent released the name within cache_linger before
	// the LOCK came: its hold may be cached when it lets go (see cache.go).
	reused bool
	// wantsEntry, entry and entryHold (guarded by the queue's mu) are its
	// place in the name's queue in the masters: see enter.
	wantsEntry bool
	entry      *quorum.Entry
	entryHold  *renewal.Hold // its heartbeat, which the watchdog renews
	// asked is the entry asked for in a round that failed: asked for again
	// under the same id, so that where it landed it keeps its place (the
	// masters answer an entry they have with its ticket), and taken out if
	// the waiter leaves first. Guarded by the queue's mu.
	asked *quorum.Entry
	// saidWanted says the agents that hold its name were told that it
	// waits (see saysWanted); the contender's alone.
	saidWanted bool
	// releaseWaitFrom is when a wait=0 LOCK began to wait for a lost
	// hold's release (see awaitLostRelease); the contender's alone.
	releaseWaitFrom time.Time
	// toldWanted is when the agents that hold its name were last told
	// that it waits (see tellWanted). Only its name's contender uses it.
	toldWanted time.Time
	// attempting says the contender has a round in flight for w; held is
	// the answer of a withdrawal that came meanwhile, which the contender
	// sends once the round is settled (a win given back in the masters
	// first: see endWithdrawn). Guarded by the queue's mu.
	attempting bool
	held       *Result
}

// Result is a LOCK's outcome: a snapshot of the hold taken under the
// session's lock, or an error.
type Result struct {
	Fence       int64
	Count       int
	Limit, Slot int
	Validity    time.Duration
	Err         error // quorum.ErrBusy for BUSY
}

// end gives w its outcome. Whoever moves w out of queued (its name's
// contender, its timer, CANCEL, its session closing, a release that passes
// it the name) calls it once, with no lock held. A LOCK of one name waits
// in no goroutine of its own: this answers it.
func (w *Waiter) end(r Result) {
	if w.timer != nil {
		w.timer.Stop()
	}
	if w.done != nil {
		w.done <- r
		return
	}
	w.sess.LockEnded(w, r)
}

// Key is the hold w waits to make: its name and owner.
func (w *Waiter) Key() HoldKey { return HoldKey{w.req.Names[0], w.req.Owner} }

// Lock and LockTag are w's LOCK (of one name) and its tag.
func (w *Waiter) Lock() protocol.Lock { return w.req }
func (w *Waiter) LockTag() string     { return w.tag }

// Multi says whether w is a wait of a multi-lock, whose goroutine awaits
// its outcome.
func (w *Waiter) Multi() bool { return w.done != nil }

// Outcome is where a multi-lock's wait receives its result.
func (w *Waiter) Outcome() <-chan Result { return w.done }

// endWithdrawn ends w, just withdrawn, with r once no round the
// contender has in flight for it can still win: a round that wins for a
// withdrawn waiter gives the name back (see grant), and until it has, the
// name is held in the masters for a LOCK whose client was told CANCELLED
// or BUSY. A client that then reads WHO, or an election's Leader, would
// find a holder nobody is (etcd's Campaign, cancelled, leaves nothing
// held either).
func (w *Waiter) endWithdrawn(r Result) {
	w.q.mu.Lock()
	if w.attempting {
		w.held = &r // the contender sends it (see queue.endAttempt)
		w.q.mu.Unlock()
		return
	}
	w.q.mu.Unlock()
	w.end(r)
}

// expire ends w's wait when its wait= ran out, unless it ended already.
func (a *Manager) expire(w *Waiter) {
	if a.withdraw(w) {
		w.endWithdrawn(w.q.timedOut(w))
	}
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
// local waiters sends one attempt, and holds one subscription, per name
// (see contender.go).
type queue struct {
	name    string
	mu      lockorder.Mutex[lockorder.Queue]
	waiters []*Waiter
	changed chan struct{}
	count   *atomic.Int64 // the agent's count of waiters in all queues
	// heard counts the rounds in which a majority of masters answered;
	// noQuorum is the last round's error if it was NO_QUORUM. A wait that
	// ends with no such round since it began answers NO_QUORUM, not BUSY.
	heard    uint64
	noQuorum error
	metrics  *Metrics // keeps the waiters gauges in step with count
	// wantEntries (guarded by mu) says a waiter wants an entry (see
	// enter); enterAfter and enterFails, the contender's alone, back off
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
	// startsWaiting). Guarded by mu.
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
func (q *queue) timedOut(w *Waiter) Result {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.heard == w.heard && q.noQuorum != nil {
		return Result{Err: QuorumError(q.noQuorum)}
	}
	return Result{Err: quorum.ErrBusy}
}

func (q *queue) poke() {
	select {
	case q.changed <- struct{}{}:
	default:
	}
}

// joinLocked puts w at the back of the queue and counts it (see
// manager.waiters). q.mu is held.
func (q *queue) joinLocked(w *Waiter) {
	q.waiters = append(q.waiters, w)
	q.kickWaitingLocked()
	q.count.Add(1)
	q.metrics.mode(w.req.Mode).Waiters.Inc()
}

// remove takes w out of the queue if it is still queued, giving it state st.
func (q *queue) remove(w *Waiter, st waiterState) bool {
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
func (q *queue) beginAttempt(w *Waiter) bool {
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
func (q *queue) endAttempt(w *Waiter) {
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
func (a *Manager) enqueue(w *Waiter) (busy bool, _ error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopping {
		return false, ErrAgentStopping
	}
	if lim := a.cfg.MaxWaiters(); a.waiters.Load() >= int64(lim) {
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

func (a *Manager) withdraw(w *Waiter) bool {
	if w.q == nil || !w.q.remove(w, withdrawn) {
		return false
	}
	a.leave(w)
	w.q.poke()
	return true
}

// NewWaiter is the wait of c's LOCK tag of l's one name, recorded as
// who; after, if not nil, is closed once a release it must wait for
// landed. A wait of a multi-lock (many) is answered on its done channel
// (Outcome); any other is answered by c.LockEnded.
func (a *Manager) NewWaiter(c Client, tag string, l protocol.Lock, who quorum.Who, many bool, after <-chan struct{}) *Waiter {
	w := &Waiter{sess: c, tag: tag, req: l, who: who, joined: time.Now(), after: after,
		reused: a.cacheOn() && a.released.has(l.Names[0], a.clock.Now())}
	if many {
		w.done = make(chan Result, 1)
	}
	return w
}

// Join puts w in its name's queue (see enqueue): a wait=0 LOCK behind
// other local waiters ends BUSY at once, and a waiting one is told to the
// notify=wanted holds of this agent, if any. An error says w was not
// queued: its LOCK is answered with it.
func (a *Manager) Join(w *Waiter) error {
	busy, err := a.enqueue(w)
	switch {
	case err != nil:
		return err
	case busy:
		w.end(Result{Err: quorum.ErrBusy})
	case w.req.Wait != 0:
		a.waiterWants(w, false) // it waits for a notify=wanted hold of this agent, if any
	}
	return nil
}

// WithdrawWith takes w out of its queue, if it is still queued, and ends
// it with r (see endWithdrawn).
func (a *Manager) WithdrawWith(w *Waiter, r Result) {
	if a.withdraw(w) {
		w.endWithdrawn(r)
	}
}

// head returns the first waiter, or nil after retiring an empty queue.
func (a *Manager) head(q *queue) *Waiter {
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
func (a *Manager) backoff(fails int) time.Duration {
	return a.retryPolicy().after(fails, rand.Float64())
}

// grant hands a won name to w, or gives it back if w went away meanwhile:
// at once, since w's answer waits for it (see Waiter.endWithdrawn).
func (a *Manager) grant(q *queue, w *Waiter, holder string, g quorum.Grant) {
	if !q.remove(w, granted) {
		a.release(context.Background(), q.name, holder, false)
		return
	}
	defer a.leave(w) // once the hold is in place
	r, err := w.sess.Install(w, holder, g)
	if err != nil {
		a.releaseAsync(q.name, holder)
		w.end(Result{Err: err})
		return
	}
	w.end(r)
}

// reenterQueued grants w as a re-entry when its session+owner came to hold
// the name while w waited (two pipelined LOCKs of one owner).
func (a *Manager) reenterQueued(w *Waiter) bool {
	r, ok := w.sess.Reenter(w, func(h *Hold) (time.Duration, bool) {
		v, ok := a.watchdog.Validity(h.rh)
		return v, ok && v > 0 && w.q.remove(w, granted)
	})
	if !ok {
		return false
	}
	a.leave(w)
	w.end(r)
	return true
}

func (a *Manager) finish(q *queue, w *Waiter, r Result) {
	if !q.remove(w, failed) {
		return
	}
	a.leave(w)
	w.end(r)
}

// A waiter may have a place in its name's queue in the masters (an entry:
// see quorum.Entry), shared by every agent: a fair=true LOCK that has to
// wait, and an exclusive one that only readers keep out (so that readers
// arriving after it cannot starve it). The contender makes the entries, in
// one round for all the waiters that want one, and renews them in the
// watchdog's batch (their heartbeat); whoever takes a waiter out of the
// queue removes its entry.
//
// The waiters of a queue that have entries are always its first ones, in
// ticket order: a waiter that wants an entry gets one together with every
// waiter ahead of it that has none, in one call. Otherwise a head without
// an entry (which may pass no entry) could wait forever for a waiter behind
// it that has one (which only the head's turn would try).

// entriesWanted says whether a waiter of q waits for an entry.
func (q *queue) entriesWanted() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.wantEntries
}

// enter gives the waiters of q that want an entry (and every one ahead of
// them that has none) their places in the masters' queue, and starts
// their heartbeats. A failed round is tried again after a back-off; the
// waiters go on waiting meanwhile.
func (a *Manager) enter(ctx context.Context, q *queue) {
	if !q.entriesWanted() || a.clock.Now().Before(q.enterAfter) {
		return
	}
	q.mu.Lock()
	last := -1
	for i, w := range q.waiters {
		if w.wantsEntry && w.entry == nil {
			last = i
		}
	}
	var ws []*Waiter
	var es []quorum.Entry
	for _, w := range q.waiters[:last+1] {
		if w.entry == nil && w.req.Wait != 0 {
			w.wantsEntry = true
			if w.asked == nil {
				w.asked = &quorum.Entry{ID: a.entryID(), Claim: claimOf(w.req)}
			}
			ws = append(ws, w)
			es = append(es, *w.asked)
		}
	}
	q.wantEntries = false
	q.mu.Unlock()
	if len(ws) == 0 {
		return
	}
	lease := a.cfg.Lease
	start := a.clock.Now()
	tickets, err := a.cluster.Enqueue(ctx, q.name, es, lease)
	if err != nil {
		// The entries may stand on some masters (a minority answered, or
		// a master answers after the round gave up on it). The retry asks
		// for the same ones, so those keep their places; a waiter that
		// leaves first takes its own out (see leave): left there, it
		// would hold up every LOCK of the name for a heartbeat.
		q.enterFails++
		q.enterAfter = a.clock.Now().Add(a.backoff(q.enterFails))
		q.mu.Lock()
		q.wantEntries = true
		q.mu.Unlock()
		a.log.Debug("queue entries not made; trying again", "name", q.name, "error", err)
		return
	}
	q.enterFails = 0
	deadline := start.Add(rules.Validity(lease, 0, a.cfg.DriftFactor))
	var gone []quorum.Entry
	q.mu.Lock()
	for i, w := range ws {
		w.asked = nil
		if tickets[i] == 0 || w.state != queued {
			gone = append(gone, es[i])
			continue
		}
		w.entry = &es[i]
		w.entryHold = &renewal.Hold{Name: q.name, Holder: es[i].Member(), Kind: renewal.KindEntry, Lease: lease, Owner: w}
		// Under q.mu, so that leave cannot remove it before it is added.
		a.watchdog.Add(w.entryHold, deadline)
	}
	q.mu.Unlock()
	a.dequeue(q.name, gone)
}

// leave removes the entry of w, which was just taken out of its queue.
func (a *Manager) leave(w *Waiter) {
	q := w.q
	q.mu.Lock()
	e, rh := w.entry, w.entryHold
	if e == nil {
		e = w.asked // its round failed: it may stand on some masters
	}
	w.entry, w.entryHold, w.asked = nil, nil, nil
	q.mu.Unlock()
	if e == nil {
		return
	}
	if rh != nil {
		a.watchdog.Remove(rh)
	}
	a.dequeue(q.name, []quorum.Entry{*e})
}

// entryLost is the watchdog's report that the heartbeat of rh's entry
// failed: the masters may have dropped it. Every entry of its queue is
// made anew, in the local order, so the entries stay the first waiters
// (see the top of this file). rh's Owner is its waiter, set before the
// watchdog had it and not changed after; the waiter's entryHold says
// whether rh is still its entry (leave, or an earlier loss, took it).
func (a *Manager) entryLost(rh *renewal.Hold) {
	w, _ := rh.Owner.(*Waiter)
	if w == nil {
		return
	}
	q := w.q
	var gone []quorum.Entry
	var beats []*renewal.Hold
	q.mu.Lock()
	if w.entryHold != rh {
		q.mu.Unlock()
		return
	}
	for _, o := range q.waiters {
		if o.entry == nil {
			continue
		}
		gone = append(gone, *o.entry)
		if o.entryHold != rh {
			beats = append(beats, o.entryHold)
		}
		o.entry, o.entryHold = nil, nil
		q.wantEntries = true
	}
	q.mu.Unlock()
	for _, b := range beats {
		a.watchdog.Remove(b)
	}
	a.log.Warn("queue entry lost; waiters queue again", "name", q.name, "waiters", len(gone))
	a.dequeue(q.name, gone)
	q.poke()
}

// dequeue removes entries of name in the background.
func (a *Manager) dequeue(name string, entries []quorum.Entry) {
	if len(entries) > 0 {
		go a.cluster.Dequeue(context.Background(), name, entries)
	}
}

// entryID is a fresh entry id, unique across every agent anywhere.
func (a *Manager) entryID() string {
	return a.cfg.AgentID + "/" + a.instance + "/q" + strconv.FormatUint(a.attempts.Add(1), 10)
}

// claimOf is the claim a LOCK asks for.
func claimOf(l protocol.Lock) quorum.Claim {
	return quorum.Claim{Mode: quorum.Mode(l.Mode), Limit: limitOf(l)}
}

// WHO lists who waits (coordination.md §5): while requests for a name wait
// on this agent, it records on the masters how many and since when
// (quorum.Cluster.SetWaiting), so that WHO on any agent shows them.
//
// A queue's requests count as waiting once an attempt for one of them
// found the name held (contended; see startsWaiting): a LOCK granted at
// once is never recorded, and costs no write. From then on, the record is
// rewritten when the count changes, coalesced: one goroutine per name
// (recordWaiting) writes the latest count when the last write is done, at
// most once per waitingEvery, so a burst of waiters costs a few writes, not
// one each, and writes never pass each other. The watchdog renews the record in its batch, and the
// goroutine removes it when the last waiter leaves; a dead agent's record
// lapses within its lease.

// waitRecord is this agent's waiting record of one name: its goroutine's
// wake-up, and the renewal the watchdog lost, if it did.
type waitRecord struct {
	name string
	kick chan struct{} // coalesced: the count may have changed
	lost atomic.Pointer[renewal.Hold]
}

// waitCount is what a record says: the count and since (Unix ms).
type waitCount struct {
	count int
	since int64
}

// startsWaiting marks q's requests as waiting (an attempt of its head
// found the name held) and has them recorded. Only q's contender calls it;
// no lock is held.
func (a *Manager) startsWaiting(q *queue) {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := a.names[q.name] // q's: not retired while its contender runs
	if n == nil {
		return
	}
	rec := n.waitRec
	if rec == nil {
		if a.runCtx == nil || a.runCtx.Err() != nil {
			return
		}
		rec = &waitRecord{name: q.name, kick: make(chan struct{}, 1)}
		n.waitRec = rec
		go a.recordWaiting(rec)
	}
	q.mu.Lock()
	q.contended, q.rec = true, rec
	q.mu.Unlock()
	signal(rec.kick)
}

// waitingNowLocked is what name's record should say. manager.mu is held.
func (a *Manager) waitingNowLocked(name string) waitCount {
	q := a.queueLocked(name)
	if q == nil {
		return waitCount{}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.contended || len(q.waiters) == 0 {
		return waitCount{}
	}
	return waitCount{count: len(q.waiters), since: q.waiters[0].joined.UnixMilli()}
}

// recordWaiting keeps rec's record on the masters in step with the count,
// until no request for its name waits.
func (a *Manager) recordWaiting(rec *waitRecord) {
	var written waitCount
	var rh *renewal.Hold // the record's renewal, while it is written
	for {
		a.mu.Lock()
		want := a.waitingNowLocked(rec.name)
		if want.count == 0 && written.count == 0 {
			if n := a.names[rec.name]; n != nil && n.waitRec == rec {
				n.waitRec = nil
				a.tidyLocked(n)
			}
			a.mu.Unlock()
			return
		}
		a.mu.Unlock()
		if lost := rec.lost.Swap(nil); lost != nil && lost == rh {
			written, rh = waitCount{}, nil // write it anew
		}
		if want != written {
			rh = a.writeWaiting(rec, want, rh)
			written = want
			a.spaceWaiting()
			continue // the count may have changed meanwhile
		}
		select {
		case <-rec.kick:
		case <-a.runCtx.Done():
			return // the record lapses within a lease
		}
	}
}

// waitingEvery spaces the writes of one name's record, so that a name
// whose waiters come and go fast (a run of local holders, say) costs the
// masters at most one small script per interval: 20 a second per name
// with churning waiters, while WHO is at most that much behind.
const waitingEvery = 50 * time.Millisecond

// spaceWaiting waits waitingEvery (not lease logic: a pace, on the real
// clock), or until the agent stops.
func (a *Manager) spaceWaiting() {
	t := time.NewTimer(waitingEvery)
	defer t.Stop()
	select {
	case <-t.C:
	case <-a.runCtx.Done():
	}
}

// writeWaiting writes want as rec's record and returns its renewal: rh,
// or a new one for a new record, or nil once it is removed.
func (a *Manager) writeWaiting(rec *waitRecord, want waitCount, rh *renewal.Hold) *renewal.Hold {
	lease := a.cfg.Lease
	start := a.clock.Now()
	a.cluster.SetWaiting(a.runCtx, rec.name, want.count, want.since, lease)
	switch {
	case want.count == 0 && rh != nil:
		a.watchdog.Remove(rh)
		return nil
	case want.count > 0 && rh == nil:
		// A write that missed the masters is found gone by the renewal,
		// and written anew (see waitingLost).
		key := a.cluster.WaitingKey(rec.name)
		rh = &renewal.Hold{Name: rec.name, Holder: key.Holder, Kind: renewal.KindWaiting, Lease: lease, Owner: rec}
		a.watchdog.Add(rh, start.Add(rules.Validity(lease, 0, a.cfg.DriftFactor)))
	}
	return rh
}

// waitingLost is the watchdog's report that rh, a waiting record's
// renewal, failed: the masters may have dropped it; it is written anew.
func (a *Manager) waitingLost(rh *renewal.Hold) {
	if rec, _ := rh.Owner.(*waitRecord); rec != nil {
		rec.lost.Store(rh)
		signal(rec.kick)
	}
}

// kickWaitingLocked tells q's record, if it has one, that its count may
// have changed. q.mu is held.
func (q *queue) kickWaitingLocked() {
	if q.rec != nil {
		signal(q.rec.kick)
	}
}

// signal sends on a coalescing channel without waiting.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
