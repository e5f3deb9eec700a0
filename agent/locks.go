package agent

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lock-agent/lock-agent/protocol"
	"github.com/lock-agent/lock-agent/quorum"
	"github.com/lock-agent/lock-agent/renewal"
)

// hold is one name held by one session+owner. count, acquired, mode and
// the session's map are guarded by the session's mu.
type hold struct {
	rh    *renewal.Hold // name, holder id, and whether it is a ttl= hold
	sess  *session
	owner string
	fence int64
	count int
	// acquired is the mode of each acquisition, the most recent last
	// (len == count): UNLOCK undoes them last first.
	acquired []protocol.Mode
	mode     protocol.Mode // as the masters hold it: exclusive while any acquisition is
	limit    int           // 1 for a lock, K for a semaphore
	slot     int           // a semaphore's slot
	// granted is when it was granted, for lock_agent_hold_seconds.
	granted time.Time
	// gaugeMode is the mode the holds gauge counts it under; guarded by
	// Agent.mu (mode changes under the session's).
	gaugeMode protocol.Mode
	// extending is held by the EXTEND in flight.
	extending sync.Mutex
}

// limitOf is a LOCK's limit: 1 for a plain lock.
func limitOf(l protocol.Lock) int { return max(l.Limit, 1) }

// reenter counts another acquisition of h by its session+owner, or says why
// it contradicts the hold: another limit, or shared to exclusive (an
// upgrade would deadlock two readers that both try it). s.mu is held.
func (h *hold) reenter(l protocol.Lock) error {
	switch {
	case limitOf(l) != h.limit:
		return protocol.Errorf(protocol.ErrConflict, "%s is held with limit=%d", h.rh.Name, h.limit)
	case h.mode == protocol.Shared && l.Mode == protocol.Exclusive:
		return protocol.Errorf(protocol.ErrConflict, "no upgrade: %s is held shared", h.rh.Name)
	}
	h.count++
	h.acquired = append(h.acquired, l.Mode)
	return nil
}

// snapshot is what a grant or re-entry answers, taken under s.mu.
func (h *hold) snapshot(validity time.Duration) result {
	return result{fence: h.fence, count: h.count, validity: validity, limit: h.limit, slot: h.slot}
}

func (h *hold) key() holdKey { return holdKey{h.rh.Name, h.owner} }

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

// waiter is one LOCK waiting in its name's queue.
type waiter struct {
	sess   *session
	tag    string
	req    protocol.Lock
	q      *queue
	who    quorum.Who // recorded with the hold; SinceMilli is set per attempt
	state  waiterState
	done   chan result // receives exactly once, when state becomes granted or failed
	cancel chan struct{}
	once   sync.Once
	// after, if not nil, is closed once this session's release of the name
	// landed: the contender tries the masters for w only then.
	after <-chan struct{}
	// heard is the queue's heard when w joined it (see queue.heard).
	heard uint64
	// joined is when its LOCK arrived, for lock_agent_wait_seconds.
	joined time.Time
}

// result is a LOCK's outcome: a snapshot of the hold taken under the
// session's lock, or an error.
type result struct {
	fence       int64
	count       int
	limit, slot int
	validity    time.Duration
	err         error // quorum.ErrBusy for BUSY
}

// queue is this agent's waiters for one name in arrival order. One contender
// goroutine works for its head against the masters, so an agent with many
// local waiters sends one attempt, and holds one subscription, per name.
type queue struct {
	name    string
	mu      sync.Mutex
	waiters []*waiter
	changed chan struct{}
	count   *atomic.Int64 // the agent's count of waiters in all queues
	// heard counts the rounds in which a majority of masters answered;
	// noQuorum is the last round's error if it was NO_QUORUM. A wait that
	// ends with no such round since it began answers NO_QUORUM, not BUSY.
	heard    uint64
	noQuorum error
	metrics  *metrics // keeps the waiters gauges in step with count
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
		return result{err: protocol.Errorf(protocol.ErrNoQuorum, "%v", q.noQuorum)}
	}
	return result{err: quorum.ErrBusy}
}

func (q *queue) poke() {
	select {
	case q.changed <- struct{}{}:
	default:
	}
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

func unsupported(l protocol.Lock) error {
	switch {
	case l.Mode == protocol.Shared && l.Limit > 1:
		return protocol.Errorf(protocol.ErrBadRequest, "mode=shared goes with a lock, not with limit=%d", l.Limit)
	case l.Fair:
		return protocol.Errorf(protocol.ErrBadRequest, "fair=true not supported yet")
	}
	return nil
}

// MinTTL is the shortest ttl= a LOCK or EXTEND may ask for: below it, the
// drift allowance (lease×drift_factor + 2ms) and the LOST lead
// (max(10ms, ttl/50)) leave a hold little or no validity.
const MinTTL = 50 * time.Millisecond

// checkTTL bounds a ttl= between MinTTL and lock.max_ttl; 0 (none) passes.
func (a *Agent) checkTTL(ttl time.Duration) error {
	switch {
	case ttl == 0:
	case ttl < MinTTL:
		return protocol.Errorf(protocol.ErrBadRequest, "ttl=%v is below the minimum ttl %v", ttl, MinTTL)
	case ttl > a.cfg.Lock.MaxTTL:
		return protocol.Errorf(protocol.ErrBadRequest, "ttl=%v is above lock.max_ttl %v", ttl, a.cfg.Lock.MaxTTL)
	}
	return nil
}

// lock takes effect at once, in the order of the session's lines: a
// re-entry is answered, anything else joins its name's queue. The wait
// runs in its own goroutine.
func (s *session) lock(req *protocol.Request) error {
	l, err := protocol.ParseLock(req)
	if err != nil {
		return err
	}
	if err := s.allow("lock", l.Names...); err != nil {
		return err
	}
	if err := unsupported(l); err != nil {
		return err
	}
	if err := s.a.checkTTL(l.TTL); err != nil {
		return err
	}
	if len(l.Names) > 1 {
		return s.lockMany(req.Tag, l)
	}
	w, r, err := s.claim(req.Tag, l)
	if err != nil {
		return err
	}
	if w == nil {
		s.send(grantLine(req.Tag, r))
		return nil
	}
	s.spawn(req.Tag, func() error {
		r := s.finishClaim(w)
		switch {
		case r.err == nil:
			s.send(grantLine(req.Tag, r))
		case errors.Is(r.err, quorum.ErrBusy):
			s.send(protocol.Reply(req.Tag, protocol.KindBusy).Bytes())
		default:
			return r.err
		}
		return nil
	})
	return nil
}

// claim takes l's one name at once: a re-entry is answered (w nil, r its
// result); anything else joins the name's queue as w, which the caller
// awaits with finishClaim.
func (s *session) claim(tag string, l protocol.Lock) (w *waiter, r result, err error) {
	a := s.a
	name := l.Names[0]
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return nil, r, protocol.Errorf(protocol.ErrShuttingDown, "session is closing")
	}
	if h := s.holds[holdKey{name, l.Owner}]; h != nil {
		if v, ok := a.watchdog.Validity(h.rh); ok && v > 0 {
			if err := h.reenter(l); err != nil {
				s.mu.Unlock()
				return nil, r, err
			}
			r := h.snapshot(v)
			s.mu.Unlock()
			a.metrics.mode(l.Mode).reentries.Inc()
			return nil, r, nil
		}
	}
	if lim := a.limits().MaxHoldsPerSession; len(s.holds)+len(s.waits) >= lim {
		s.mu.Unlock()
		return nil, r, protocol.Errorf(protocol.ErrLimit, "session holds or waits for %d names (max_holds_per_session)", lim)
	}
	if _, dup := s.waits[tag]; dup {
		s.mu.Unlock()
		return nil, r, protocol.Errorf(protocol.ErrBadRequest, "tag %s already names a waiting LOCK", tag)
	}
	w = &waiter{sess: s, tag: tag, req: l, done: make(chan result, 1), cancel: make(chan struct{}), joined: time.Now()}
	w.who = quorum.Who{Agent: a.cfg.AgentID, PID: s.cred.PID, UID: s.cred.UID, Owner: l.Owner}
	if r := s.releasing[name]; r != nil {
		w.after = r.done
	}
	s.waits[tag] = w
	s.mu.Unlock()
	if err := a.enqueue(w); err != nil {
		s.forgetWait(w)
		return nil, r, err
	}
	return w, r, nil
}

// finishClaim awaits w's result.
func (s *session) finishClaim(w *waiter) result {
	r := s.await(w)
	s.a.metrics.lockAnswered(w, r)
	// Before the reply: the client may reuse the tag, and a grant must not
	// count against max_holds_per_session twice.
	s.forgetWait(w)
	return r
}

// lockMany is a LOCK of several names: all are granted or none is held.
// The names are claimed in byte order, whatever order they were given,
// each holding the ones before it while it waits, under one wait= budget:
// two multi-locks over the same names then never wait for each other in a
// cycle. The reply lists fences and counts in the order the names were given.
func (s *session) lockMany(tag string, l protocol.Lock) error {
	for i, name := range l.Names {
		if slices.Contains(l.Names[:i], name) {
			return protocol.Errorf(protocol.ErrBadRequest, "%s is named twice", name)
		}
	}
	if l.TTL > 0 {
		return protocol.Errorf(protocol.ErrBadRequest, "ttl= with several names not supported yet")
	}
	s.mu.Lock()
	held, lim := len(s.holds)+len(s.waits), s.a.limits().MaxHoldsPerSession
	s.mu.Unlock()
	if held+len(l.Names) > lim {
		return protocol.Errorf(protocol.ErrLimit, "session would hold %d names (max_holds_per_session=%d)", held+len(l.Names), lim)
	}
	order := make([]int, len(l.Names))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(i, j int) int { return strings.Compare(l.Names[i], l.Names[j]) })
	deadline := time.Now().Add(l.Wait)
	s.spawn(tag, func() error {
		results := make([]result, len(l.Names))
		var claimed []string
		for _, i := range order {
			one := l
			one.Names = l.Names[i : i+1]
			if l.Wait > 0 && l.Wait != protocol.Forever {
				one.Wait = max(time.Until(deadline), time.Millisecond)
			}
			w, r, err := s.claim(tag, one)
			if err == nil && w != nil {
				r = s.finishClaim(w)
				err = r.err
			}
			if err != nil {
				s.rollback(claimed, l.Owner)
				if errors.Is(err, quorum.ErrBusy) {
					s.send(protocol.Reply(tag, protocol.KindBusy).Bytes())
					return nil
				}
				return err
			}
			results[i] = r
			claimed = append(claimed, l.Names[i])
		}
		s.send(grantManyLine(tag, results))
		return nil
	})
	return nil
}

// rollback undoes the acquisition a failed multi-lock made of each of
// names (the most recent one), and waits until what it released is released.
func (s *session) rollback(names []string, owner string) {
	var finish []func()
	s.mu.Lock()
	for _, name := range names {
		if s.holds[holdKey{name, owner}] == nil {
			continue // lost meanwhile
		}
		if _, f := s.undoLocked(holdKey{name, owner}, ""); f != nil {
			finish = append(finish, f)
		}
	}
	s.mu.Unlock()
	for _, f := range finish {
		f()
	}
}

// grantManyLine answers a multi-lock: fences, counts (and slots) in the
// order the names were given, and the smallest validity.
func grantManyLine(tag string, rs []result) []byte {
	fences, counts, slots := make([]string, len(rs)), make([]string, len(rs)), make([]string, len(rs))
	validity := rs[0].validity
	for i, r := range rs {
		fences[i], counts[i], slots[i] = strconv.FormatInt(r.fence, 10), strconv.Itoa(r.count), strconv.Itoa(r.slot)
		validity = min(validity, r.validity)
	}
	l := protocol.Reply(tag, protocol.KindOK).Str("fence", strings.Join(fences, ",")).Int("validity", validity.Milliseconds()).
		Str("count", strings.Join(counts, ","))
	if rs[0].limit > 1 {
		l.Str("slot", strings.Join(slots, ","))
	}
	return l.Bytes()
}

// forgetWait takes w out of the session's waits, if it is still there.
func (s *session) forgetWait(w *waiter) {
	s.mu.Lock()
	s.dropWaitLocked(w)
	s.mu.Unlock()
}

func (s *session) dropWaitLocked(w *waiter) {
	if s.waits[w.tag] == w {
		delete(s.waits, w.tag)
	}
}

// errSessionGone ends the waits of a closing session. The client may have
// only shut its writing side, so it is still told.
var errSessionGone = protocol.Errorf(protocol.ErrCancelled, "session closed")

// await waits for w's result, or withdraws it when its wait runs out, it is
// cancelled, or the session closes. A result that won the race is kept.
func (s *session) await(w *waiter) result {
	var timeout <-chan time.Time
	if w.req.Wait > 0 {
		t := time.NewTimer(w.req.Wait)
		defer t.Stop()
		timeout = t.C
	}
	var why result
	select {
	case r := <-w.done:
		return r
	case <-timeout:
		if s.a.withdraw(w) {
			return w.q.timedOut(w)
		}
		return <-w.done
	case <-w.cancel:
		why = result{err: protocol.Errorf(protocol.ErrCancelled, "cancelled by CANCEL")}
	case <-s.ctx.Done():
		why = result{err: errSessionGone}
	}
	if s.a.withdraw(w) {
		return why
	}
	return <-w.done
}

func grantLine(tag string, r result) []byte {
	l := protocol.Reply(tag, protocol.KindOK).Int("fence", r.fence).Int("validity", r.validity.Milliseconds()).Int("count", int64(r.count))
	if r.limit > 1 {
		l.Int("slot", int64(r.slot))
	}
	return l.Bytes()
}

func lostLine(h *hold, reason string) []byte {
	return protocol.Push("LOST").Word(h.rh.Name).Str("owner", h.owner).Int("fence", h.fence).Str("reason", reason).Bytes()
}

// enqueue puts w at the back of its name's queue, starting the name's
// contender if it has none. A wait=0 LOCK behind other local waiters is BUSY
// at once: the name is contended and it may not wait.
func (a *Agent) enqueue(w *waiter) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopping {
		return protocol.Errorf(protocol.ErrShuttingDown, "agent is stopping")
	}
	if lim := a.limits().MaxWaiters; a.waiters.Load() >= int64(lim) {
		return protocol.Errorf(protocol.ErrLimit, "agent has %d waiting LOCKs (max_waiters)", lim)
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
		w.done <- result{err: quorum.ErrBusy}
		return nil
	}
	w.q = q
	w.heard = q.heard
	q.waiters = append(q.waiters, w)
	a.waiters.Add(1)
	a.metrics.mode(w.req.Mode).waiters.Inc()
	q.mu.Unlock()
	if start {
		go a.contend(q)
	}
	return nil
}

func (a *Agent) withdraw(w *waiter) bool {
	if w.q == nil || !w.q.remove(w, withdrawn) {
		return false
	}
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
//     publishes) waits a jittered back-off that release messages do not cut;
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
		}
		if ctx.Err() != nil {
			a.finish(q, w, result{err: protocol.Errorf(protocol.ErrShuttingDown, "agent is stopping")})
			continue
		}
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
		g, err := a.cluster.Acquire(ctx, quorum.AcquireRequest{Name: q.name, Holder: holder, Lease: lease,
			Claim: quorum.Claim{Mode: quorum.Mode(w.req.Mode), Limit: limitOf(w.req), Slot: slot}, Who: who})
		wasWoken := woken
		woken = false
		if err == nil {
			q.roundDone(nil)
			a.grant(q, w, holder, g)
			fails = 0
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
				a.finish(q, w, result{err: protocol.Errorf(protocol.ErrNoQuorum, "%v", err)})
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
		if watch == nil {
			// Subscribe, then try again at once: a release between the
			// first attempt and the subscription would otherwise be missed.
			watch = a.cluster.Watch(ctx, q.name)
			continue
		}
		if round.Yes > 0 || round.RetryAfter <= 0 {
			// A split vote, or a holder with no lease: back off with jitter
			// so that contending agents do not split again in lock step.
			fails++
			notBefore = a.clock.Now().Add(a.backoff(fails))
			continue
		}
		if wasWoken {
			fails++
		}
		parked := a.clock.Now()
		t := a.clock.NewTimer(min(time.Duration(round.RetryAfter)*time.Millisecond, a.cfg.Lock.Lease))
		select {
		case <-watch.C():
			woken = true
		case <-q.changed:
			woken = true
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
	r, err := w.sess.install(w, holder, g)
	if err != nil {
		a.releaseAsync(q.name, holder)
		w.done <- result{err: err}
		return
	}
	r.validity = g.Deadline.Sub(a.clock.Now())
	w.done <- r
}

// reenterQueued grants w as a re-entry when its session+owner came to hold
// the name while w waited (two pipelined LOCKs of one owner).
func (s *session) reenterQueued(w *waiter) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.holds[holdKey{w.req.Names[0], w.req.Owner}]
	if h == nil {
		return false
	}
	v, ok := s.a.watchdog.Validity(h.rh)
	if !ok || v <= 0 || !w.q.remove(w, granted) {
		return false
	}
	if err := h.reenter(w.req); err != nil {
		s.dropWaitLocked(w)
		w.done <- result{err: err}
		return true
	}
	s.dropWaitLocked(w)
	w.done <- h.snapshot(v)
	return true
}

func (a *Agent) finish(q *queue, w *waiter, r result) {
	if !q.remove(w, failed) {
		return
	}
	w.done <- r
}

// install records a granted hold in the session and the watchdog.
func (s *session) install(w *waiter, holder string, g quorum.Grant) (result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return result{}, errSessionGone
	}
	key := holdKey{w.req.Names[0], w.req.Owner}
	if old := s.holds[key]; old != nil {
		// Lost while w's attempt was in flight and not yet forgotten: the
		// new grant replaces it.
		s.a.forget(old)
	}
	lease := s.a.cfg.Lock.Lease
	if w.req.TTL > 0 {
		lease = w.req.TTL
	}
	h := &hold{rh: &renewal.Hold{Name: key.name, Holder: holder, Fixed: w.req.TTL > 0, Lease: lease, Record: g.Record}, sess: s, owner: key.owner,
		fence: g.Fence, count: 1, acquired: []protocol.Mode{w.req.Mode}, mode: w.req.Mode, limit: limitOf(w.req), slot: g.Slot, granted: time.Now(), gaugeMode: w.req.Mode}
	s.holds[key] = h
	s.dropWaitLocked(w) // now counted as a hold
	s.a.mu.Lock()
	s.a.holds[h.rh] = h
	s.a.metrics.holdStarted(h)
	s.a.mu.Unlock()
	s.a.watchdog.Add(h.rh, g.Deadline)
	return h.snapshot(0), nil
}

// onLost is the watchdog's report of a hold that ended on its own.
func (a *Agent) onLost(rh *renewal.Hold, reason renewal.Reason) {
	a.mu.Lock()
	h := a.holds[rh]
	delete(a.holds, rh)
	if h != nil {
		a.metrics.holdEnded(h)
	}
	a.mu.Unlock()
	if h == nil {
		return
	}
	s := h.sess
	s.mu.Lock()
	mine := s.holds[h.key()] == h
	if mine {
		delete(s.holds, h.key())
		// Queued before s.mu is let go: an UNLOCK that finds the hold gone
		// (it looks under s.mu) answers NOT_HELD after the client heard why.
		// push never blocks, so it may run under s.mu (s.mu before s.out.mu).
		a.metrics.lost(reason) // counted before the client can hear of it
		s.push(lostLine(h, string(reason)))
	}
	s.mu.Unlock()
	if mine {
		s.log.Warn("hold lost", "name", rh.Name, "owner", h.owner, "fence", h.fence, "reason", reason)
		a.releaseAsync(rh.Name, rh.Holder)
	}
}

// forget drops a hold from the agent's books before it is released.
func (a *Agent) forget(h *hold) {
	a.mu.Lock()
	if a.holds[h.rh] == h { // not if it was lost already
		delete(a.holds, h.rh)
		a.metrics.holdEnded(h)
	}
	a.mu.Unlock()
	a.watchdog.Remove(h.rh)
}

// release drops a hold in the masters and lets local waiters try at once.
func (a *Agent) release(ctx context.Context, name, holder string) {
	if _, err := a.cluster.Release(ctx, name, holder); err != nil {
		a.log.Warn("release reached no master; the lease will expire", "name", name, "error", err)
	}
	a.mu.Lock()
	q := a.queues[name]
	a.mu.Unlock()
	if q != nil {
		q.poke()
	}
}

func (a *Agent) releaseAsync(name, holder string) {
	go a.release(context.Background(), name, holder)
}

// releaseAll releases holds in one batched round per master and returns
// when it is done, then lets the names' local waiters try at once.
func (a *Agent) releaseAll(holds map[holdKey]*hold) {
	if len(holds) == 0 {
		return
	}
	keys := make([]quorum.RenewKey, 0, len(holds))
	for _, h := range holds {
		a.forget(h)
		keys = append(keys, quorum.RenewKey{Name: h.rh.Name, Holder: h.rh.Holder})
	}
	a.cluster.ReleaseMany(context.Background(), keys)
	for _, k := range keys {
		a.mu.Lock()
		q := a.queues[k.Name]
		a.mu.Unlock()
		if q != nil {
			q.poke()
		}
	}
}

// unlock drops the hold from the session at once, in the order of the
// session's lines; the release in the masters runs in its own goroutine and
// the reply comes when it is done.
func (s *session) unlock(req *protocol.Request) error {
	u, err := protocol.ParseUnlock(req)
	if err != nil {
		return err
	}
	if err := s.allow("unlock", u.Names...); err != nil {
		return err
	}
	// All or nothing: every name must be held (with an exclusive
	// acquisition, for a downgrade) before anything is undone.
	s.mu.Lock()
	for i, name := range u.Names {
		if slices.Contains(u.Names[:i], name) {
			s.mu.Unlock()
			return protocol.Errorf(protocol.ErrBadRequest, "%s is named twice", name)
		}
		h := s.holds[holdKey{name, u.Owner}]
		if h == nil {
			s.mu.Unlock()
			return protocol.Errorf(protocol.ErrNotHeld, "%s is not held by this session and owner %q", name, u.Owner)
		}
		if u.Mode == protocol.Exclusive && !slices.Contains(h.acquired, protocol.Exclusive) {
			s.mu.Unlock()
			return protocol.Errorf(protocol.ErrNotHeld, "%s has no exclusive acquisition left to undo", name)
		}
	}
	counts := make([]string, len(u.Names))
	var finish []func()
	for i, name := range u.Names {
		count, f := s.undoLocked(holdKey{name, u.Owner}, u.Mode)
		counts[i] = strconv.Itoa(count)
		if f != nil {
			finish = append(finish, f)
		}
	}
	s.mu.Unlock()
	reply := protocol.Reply(req.Tag, protocol.KindOK).Str("count", strings.Join(counts, ",")).Bytes()
	if len(finish) == 0 {
		s.send(reply)
		return nil
	}
	s.spawn(req.Tag, func() error {
		for _, f := range finish {
			f()
		}
		s.send(reply)
		return nil
	})
	return nil
}

// undoLocked undoes the most recent acquisition of key (the most recent
// exclusive one, for mode exclusive), which the caller checked exists, and
// returns the count left and what remains to do in the masters (a release
// or a downgrade; nil if nothing). s.mu is held.
func (s *session) undoLocked(key holdKey, mode protocol.Mode) (int, func()) {
	h := s.holds[key]
	undo := len(h.acquired) - 1
	if mode == protocol.Exclusive {
		for undo >= 0 && h.acquired[undo] != protocol.Exclusive {
			undo--
		}
	}
	h.acquired = append(h.acquired[:undo], h.acquired[undo+1:]...)
	h.count--
	// Only shared acquisitions left of an exclusive hold: it becomes shared
	// (here at once, so that a following exclusive LOCK is an upgrade; in
	// the masters by the downgrade round).
	if h.count > 0 && h.mode == protocol.Exclusive && !slices.Contains(h.acquired, protocol.Exclusive) {
		h.mode = protocol.Shared
		s.a.mu.Lock()
		if s.a.holds[h.rh] == h {
			s.a.metrics.holdDowngraded(h)
		}
		s.a.mu.Unlock()
		return h.count, func() {
			if err := s.a.cluster.Downgrade(s.ctx, h.rh.Name, h.rh.Holder); err != nil {
				s.log.Warn("downgrade did not reach a majority; the hold stays exclusive in the masters", "name", h.rh.Name, "error", err)
			}
		}
	}
	if h.count > 0 {
		return h.count, nil
	}
	delete(s.holds, key)
	rel := s.releaseStarted(key.name)
	return 0, func() {
		s.a.forget(h)
		s.a.release(s.ctx, h.rh.Name, h.rh.Holder)
		s.releaseDone(key.name, rel)
	}
}

// releaseStarted notes a release of name on its way to the masters. s.mu is held.
func (s *session) releaseStarted(name string) *release {
	r := s.releasing[name]
	if r == nil {
		if s.releasing == nil {
			s.releasing = map[string]*release{}
		}
		r = &release{done: make(chan struct{})}
		s.releasing[name] = r
	}
	r.n++
	return r
}

// releaseDone notes that a release of name landed.
func (s *session) releaseDone(name string, r *release) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.n--; r.n == 0 {
		close(r.done)
		delete(s.releasing, name)
		if len(s.releasing) == 0 {
			s.releasing = nil
		}
	}
}

// extend finds the hold at once; the masters are asked in its own goroutine.
func (s *session) extend(req *protocol.Request) error {
	e, err := protocol.ParseExtend(req)
	if err != nil {
		return err
	}
	if err := s.allow("extend", e.Name); err != nil {
		return err
	}
	if err := s.a.checkTTL(e.TTL); err != nil {
		return err
	}
	s.mu.Lock()
	h := s.holds[holdKey{e.Name, e.Owner}]
	s.mu.Unlock()
	if h == nil {
		return protocol.Errorf(protocol.ErrNotHeld, "%s is not held by this session and owner %q", e.Name, e.Owner)
	}
	s.spawn(req.Tag, func() error {
		// One EXTEND of a hold at a time: two in flight could leave the
		// masters with one lease and the agent with the other.
		h.extending.Lock()
		defer h.extending.Unlock()
		if !s.a.watchdog.BeginExtend(h.rh, e.TTL) {
			return protocol.Errorf(protocol.ErrNotHeld, "%s was lost", e.Name)
		}
		deadline, err := s.a.cluster.Extend(s.ctx, h.rh.Name, h.rh.Holder, e.TTL)
		switch {
		case errors.Is(err, quorum.ErrNotHeld):
			return protocol.Errorf(protocol.ErrNotHeld, "%s is no longer held in the masters", e.Name)
		case err != nil:
			s.a.metrics.noQuorumAnswered("extend")
			return protocol.Errorf(protocol.ErrNoQuorum, "%v", err)
		}
		if !s.a.watchdog.Extend(h.rh, e.TTL, deadline) {
			return protocol.Errorf(protocol.ErrNotHeld, "%s was lost", e.Name)
		}
		s.send(protocol.Reply(req.Tag, protocol.KindOK).Int("validity", deadline.Sub(s.a.clock.Now()).Milliseconds()).Bytes())
		return nil
	})
	return nil
}

func (s *session) cancelWait(req *protocol.Request) error {
	tag, err := protocol.ParseCancel(req)
	if err != nil {
		return err
	}
	s.mu.Lock()
	w := s.waits[tag]
	s.mu.Unlock()
	if w != nil {
		w.once.Do(func() { close(w.cancel) })
	}
	s.send(protocol.Reply(req.Tag, protocol.KindOK).Bytes())
	return nil
}

func (s *session) listHolds(req *protocol.Request) error {
	if err := req.NoArgs(); err != nil {
		return err
	}
	s.mu.Lock()
	var lines [][]byte
	for _, h := range s.holds {
		v, _ := s.a.watchdog.Validity(h.rh)
		l := protocol.Reply(req.Tag, protocol.KindData).Str("name", h.rh.Name).Str("owner", h.owner).
			Int("fence", h.fence).Int("count", int64(h.count)).Str("mode", string(h.mode)).Int("validity", v.Milliseconds())
		if h.limit > 1 {
			l.Int("limit", int64(h.limit)).Int("slot", int64(h.slot))
		}
		lines = append(lines, l.Bytes())
	}
	s.mu.Unlock()
	for _, l := range lines {
		s.send(l)
	}
	s.send(protocol.Reply(req.Tag, protocol.KindOK).Int("n", int64(len(lines))).Bytes())
	return nil
}

func (s *session) who(req *protocol.Request) error {
	name, err := protocol.ParseWho(req)
	if err != nil {
		return err
	}
	if err := s.allow("who", name); err != nil {
		return err
	}
	s.spawn(req.Tag, func() error { return s.whoReply(req.Tag, name) })
	return nil
}

func (s *session) whoReply(tag, name string) error {
	holders, err := s.a.cluster.Who(s.ctx, name)
	if err != nil {
		s.a.metrics.noQuorumAnswered("who")
		return protocol.Errorf(protocol.ErrNoQuorum, "%v", err)
	}
	for _, h := range holders {
		r := h.Record
		l := protocol.Reply(tag, protocol.KindData).Str("agent", r.Who.Agent).Int("pid", int64(r.Who.PID)).
			Int("uid", int64(r.Who.UID)).Str("owner", r.Who.Owner).Str("mode", string(r.Claim.Mode)).
			Int("fence", r.Fence).Int("since", r.Who.SinceMilli)
		if r.Claim.Limit > 1 {
			l.Int("limit", int64(r.Claim.Limit)).Int("slot", int64(r.Claim.Slot))
		}
		s.send(l.Bytes())
	}
	s.send(protocol.Reply(tag, protocol.KindOK).Int("n", int64(len(holders))).Bytes())
	return nil
}
