package agent

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/lock-agent/lock-agent/protocol"
	"github.com/lock-agent/lock-agent/quorum"
)

// LOCK: its checks (ttl=, the kinds that go together), a re-entry answered
// at once, a name lent from this agent's record, or else a wait in the
// name's queue (waiters.go); a LOCK of several names (a multi-lock) claims
// them one by one in its own goroutine, all or none; and its reply lines.

func unsupported(l protocol.Lock) error {
	switch {
	case l.Mode == protocol.Shared && l.Limit > 1:
		return protocol.Errorf(protocol.ErrBadRequest, "mode=shared goes with a lock, not with limit=%d", l.Limit)
	}
	return nil
}

// MinTTL is the shortest ttl= a LOCK or EXTEND may ask for: below it, the
// drift allowance (lease×drift_factor + 2ms) and the LOST lead
// (max(10ms, ttl/50)) leave a hold little or no validity.
const MinTTL = 50 * time.Millisecond

// checkTTL bounds a ttl= between MinTTL and protocol.MaxTTL (30 days); 0
// (none) passes. lock.max_ttl bounds nothing: a ttl= hold is renewed like
// any other until its end, so its length costs the masters nothing (no
// longer quarantine, no longer record) and is the client's to choose.
func (a *Agent) checkTTL(ttl time.Duration) error {
	switch {
	case ttl == 0:
	case ttl < MinTTL:
		return protocol.Errorf(protocol.ErrBadRequest, "ttl=%v is below the minimum ttl %v", ttl, MinTTL)
	case ttl > protocol.MaxTTL:
		return protocol.Errorf(protocol.ErrBadRequest, "ttl=%v is above the maximum ttl %v", ttl, protocol.MaxTTL)
	}
	return nil
}

// lock takes effect at once, in the order of the session's lines: a
// re-entry is answered, anything else joins its name's queue, and is
// answered when its wait ends (see waiter.end).
func (s *session) lock(tag string, l protocol.Lock) error {
	if err := s.allow("lock", l.Names...); err != nil {
		return err
	}
	if err := unsupported(l); err != nil {
		return err
	}
	if err := s.a.checkTTL(l.TTL); err != nil {
		return err
	}
	l = s.a.withTails(l)
	if len(l.Names) > 1 {
		return s.lockMany(tag, l)
	}
	w, r, err := s.claim(tag, l, false)
	if err == nil && w == nil {
		s.answerLock(tag, grantLine(tag, r))
	}
	return err
}

// claim takes l's one name at once: a re-entry is answered (w nil, r its
// result); anything else joins the name's queue as w. A wait of a
// multi-lock (many) is awaited with finishClaim; any other is answered when
// it ends.
func (s *session) claim(tag string, l protocol.Lock, many bool) (w *waiter, r result, err error) {
	a := s.a
	name := l.Names[0]
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return nil, r, protocol.Errorf(protocol.ErrShuttingDown, "session is closing")
	}
	var afterLost func() // see loseFoundLocked
	defer func() {
		if afterLost != nil {
			afterLost()
		}
	}()
	if h := s.holds[holdKey{name, l.Owner}]; h != nil {
		if v, ok := a.watchdog.Validity(h.rh); ok && v > 0 {
			if err := h.reenter(l); err != nil {
				s.mu.Unlock()
				return nil, r, err
			}
			r := h.snapshot(v)
			s.mu.Unlock()
			a.metrics.mode(l.Mode).Reentries.Inc()
			return nil, r, nil
		}
		afterLost = s.loseFoundLocked(h) // the new hold's grant comes after its LOST
	}
	if lim := a.limits().MaxHoldsPerSession; len(s.holds)+s.waiting >= lim {
		s.mu.Unlock()
		return nil, r, protocol.Errorf(protocol.ErrLimit, "session holds or waits for %d names (max_holds_per_session)", lim)
	}
	if w, multi := s.lockLocked(tag); w != nil || (!many && multi != nil) {
		s.mu.Unlock()
		return nil, r, protocol.Errorf(protocol.ErrBadRequest, "tag %s already names a waiting LOCK", tag)
	}
	r, lent, after := s.lendCachedLocked(l, !many)
	if lent {
		s.mu.Unlock()
		return nil, r, nil
	}
	w = s.newWaiterLocked(tag, l, many, after)
	s.mu.Unlock()
	busy, err := a.enqueue(w)
	if err != nil {
		s.forgetWait(w)
		if !many {
			s.reqs.Done()
		}
		return nil, r, err
	}
	if busy {
		w.end(result{err: quorum.ErrBusy})
	} else if l.Wait != 0 {
		a.waiterWants(w, false) // it waits for a notify=wanted hold of this agent, if any
	}
	return w, r, nil
}

// newWaiterLocked is the wait of the LOCK tag of l's one name, noted as its
// wait (see pendingLock); after, if not nil, is closed once a release it
// must wait for landed. A wait of a multi-lock (many) is answered on its
// done channel; any other is counted in s.reqs until it is answered. s.mu
// is held.
func (s *session) newWaiterLocked(tag string, l protocol.Lock, many bool, after <-chan struct{}) *waiter {
	a, name := s.a, l.Names[0]
	w := &waiter{sess: s, tag: tag, req: l, joined: time.Now(), after: after,
		reused: a.cacheOn() && a.released.has(name, a.clock.Now())}
	if many {
		w.done = make(chan result, 1)
	} else {
		s.reqs.Add(1) // until end answers it: a closing session waits for that
	}
	w.who = quorum.Who{Agent: a.cfg.AgentID, PID: s.cred.PID, UID: s.cred.UID, Owner: l.Owner, Value: l.Value}
	if r := s.releasing[name]; r != nil && w.after == nil {
		w.after = r.done
	}
	s.pendingLocked(tag).wait = w
	s.waiting++
	return w
}

// finishClaim awaits the result of w, a wait of a multi-lock, or withdraws
// it when stop ends (CANCEL, or the session closing). Only the multi-lock's
// goroutine withdraws it: CANCEL and close may find w in the session's
// waits before it is queued.
func (s *session) finishClaim(stop context.Context, w *waiter) result {
	var r result
	select {
	case r = <-w.done:
	case <-stop.Done():
		if s.a.withdraw(w) {
			w.endWithdrawn(result{err: stopped(stop)})
		}
		r = <-w.done
	}
	s.a.metrics.lockAnswered(w, r)
	s.forgetWait(w) // before the next name is claimed under the same tag
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
	// Noted at once, in the order of the session's lines, so that a CANCEL
	// right behind it finds it whichever name it is claiming, or none yet.
	stop, cancel := context.WithCancelCause(s.ctx)
	if err := s.startMulti(tag, len(l.Names), cancel); err != nil {
		cancel(nil)
		return err
	}
	deadline := s.a.clock.Now().Add(l.Wait)
	s.spawn(tag, func() error {
		reply, err := s.lockAll(stop, tag, l, deadline)
		s.mu.Lock()
		s.endMultiLocked(tag)   // before the answer: the client may reuse the tag
		var ended chan struct{} // closed once: a multi-lock sent after bye finds none
		if s.multis == 0 {
			ended, s.multisEnded = s.multisEnded, nil
		}
		s.mu.Unlock()
		cancel(nil)
		if err != nil {
			reply = protocol.Failed{Tag: tag, Err: err}.Bytes()
		}
		s.answerLock(tag, reply)
		if ended != nil { // the agent is stopping: bye waits for this answer
			close(ended)
		}
		return nil
	})
	return nil
}

// startMulti notes the multi-lock tag of n names, which CANCEL ends with
// cancel, unless its tag names a waiting LOCK or the session would hold
// too many names.
func (s *session) startMulti(tag string, n int, cancel context.CancelCauseFunc) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w, multi := s.lockLocked(tag); w != nil || multi != nil {
		return protocol.Errorf(protocol.ErrBadRequest, "tag %s already names a waiting LOCK", tag)
	}
	if held, lim := len(s.holds)+s.waiting, s.a.limits().MaxHoldsPerSession; held+n > lim {
		return protocol.Errorf(protocol.ErrLimit, "session would hold %d names (max_holds_per_session=%d)", held+n, lim)
	}
	s.pendingLocked(tag).multi = cancel
	s.multis++
	return nil
}

// lockAll claims the names of the multi-lock tag one by one (see lockMany)
// until stop ends, and returns its answer.
func (s *session) lockAll(stop context.Context, tag string, l protocol.Lock, deadline time.Time) ([]byte, error) {
	order := make([]int, len(l.Names))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(i, j int) int { return strings.Compare(l.Names[i], l.Names[j]) })
	results := make([]result, len(l.Names))
	var claimed []string
	for _, i := range order {
		one := l
		one.Names = l.Names[i : i+1]
		one.TTL = 0 // no end until all are won: see setEnds
		if l.Wait > 0 && l.Wait != protocol.Forever {
			one.Wait = max(deadline.Sub(s.a.clock.Now()), time.Millisecond)
		}
		w, r, err := s.claim(tag, one, true)
		if err == nil && w != nil {
			r = s.finishClaim(stop, w)
			err = r.err
		}
		if err != nil {
			s.rollback(claimed, l.Owner)
			if errors.Is(err, quorum.ErrBusy) {
				return protocol.Busy{Tag: tag}.Bytes(), nil
			}
			return nil, err
		}
		results[i] = r
		claimed = append(claimed, l.Names[i])
	}
	if l.TTL > 0 {
		if err := s.setEnds(l, results); err != nil {
			s.rollback(claimed, l.Owner)
			return nil, err
		}
	}
	return grantManyLine(tag, results), nil
}

// setEnds gives the names of a multi-lock with ttl=, won as watchdog holds,
// their end: ttl from now, once every name is held, so that waiting for the
// last name does not eat into the first one's ttl. No master is asked (see
// extend). A name re-entered by this LOCK keeps the hold it had. It fails
// with NO_QUORUM if a name was lost meanwhile; the caller then releases
// everything.
func (s *session) setEnds(l protocol.Lock, results []result) error {
	end := s.a.clock.Now().Add(l.TTL)
	for i, name := range l.Names {
		if results[i].count != 1 {
			continue
		}
		s.mu.Lock()
		h := s.holds[holdKey{name, l.Owner}]
		s.mu.Unlock()
		ok := false
		if h != nil {
			s.a.leaveCohort(h) // an end is this holder's, not the next one's
			results[i].validity, ok = s.a.watchdog.SetEnd(h.rh, end)
		}
		if !ok {
			return protocol.Errorf(protocol.ErrNoQuorum, "%s was lost before its ttl was set", name)
		}
	}
	return nil
}

// rollback undoes the acquisition a failed multi-lock made of each of
// names (the most recent one), and waits until what it released is released.
func (s *session) rollback(names []string, owner string) {
	var left []*undone
	s.mu.Lock()
	for _, name := range names {
		if s.holds[holdKey{name, owner}] == nil {
			continue // lost meanwhile
		}
		if _, d := s.undoLocked(holdKey{name, owner}, ""); d != nil {
			d.rollback = true
			left = append(left, d)
		}
	}
	s.mu.Unlock()
	for _, d := range left {
		if !d.now(s) {
			d.rest(s)
		}
	}
}

// grantManyLine answers a multi-lock: fences, counts (and slots) in the
// order the names were given, and the smallest validity.
func grantManyLine(tag string, rs []result) []byte {
	g := protocol.GrantedAll{Tag: tag, Fences: make([]int64, len(rs)), Validity: rs[0].validity,
		Counts: make([]int, len(rs)), Slots: make([]int, len(rs)), Limit: rs[0].limit}
	for i, r := range rs {
		g.Fences[i], g.Counts[i], g.Slots[i] = r.fence, r.count, r.slot
		g.Validity = min(g.Validity, r.validity)
	}
	return g.Bytes()
}

// forgetWait takes w out of its LOCK's record, if it is still there.
func (s *session) forgetWait(w *waiter) {
	s.mu.Lock()
	s.dropWaitLocked(w)
	s.mu.Unlock()
}

func (s *session) dropWaitLocked(w *waiter) {
	if p := s.locks[w.tag]; p != nil && p.wait == w {
		p.wait = nil
		s.waiting--
		s.tidyLockLocked(w.tag, p)
	}
}

// stopped is why stop, a multi-lock's context, ended: CANCEL, the session
// closing, or else the agent stopping.
func stopped(stop context.Context) error {
	var perr *protocol.Error
	if err := context.Cause(stop); errors.As(err, &perr) {
		return err
	}
	return errAgentStopping
}

func grantLine(tag string, r result) []byte {
	return protocol.Granted{Tag: tag, Fence: r.fence, Validity: r.validity, Count: r.count, Limit: r.limit, Slot: r.slot}.Bytes()
}
