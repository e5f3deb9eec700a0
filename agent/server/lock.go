package server

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/lock-agent/lock-agent/agent/locks"
	"github.com/lock-agent/lock-agent/protocol"
	"github.com/lock-agent/lock-agent/quorum"
)

// LOCK: its checks (ttl=, the kinds that go together), a re-entry answered
// at once, a name lent from this agent's record, or else a wait in the
// name's queue (agent/locks/waiters.go); a LOCK of several names (a multi-lock) claims
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
func checkTTL(ttl time.Duration) error {
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
// answered when its wait ends (see locks.Waiter's end).
func (s *session) lock(tag string, l protocol.Lock) error {
	if err := s.allow("lock", l.Names...); err != nil {
		return err
	}
	if err := unsupported(l); err != nil {
		return err
	}
	if err := checkTTL(l.TTL); err != nil {
		return err
	}
	l = s.srv.withTails(l)
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
func (s *session) claim(tag string, l protocol.Lock, many bool) (w *locks.Waiter, r locks.Result, err error) {
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
	if h := s.holds[locks.HoldKey{Name: name, Owner: l.Owner}]; h != nil {
		if v, ok := s.manager.Validity(h); ok && v > 0 {
			if err := h.Reenter(l); err != nil {
				s.mu.Unlock()
				return nil, r, err
			}
			r := h.Snapshot(v)
			s.mu.Unlock()
			s.srv.metrics.Mode(l.Mode).Reentries.Inc()
			return nil, r, nil
		}
		afterLost = s.loseFoundLocked(h) // the new hold's grant comes after its LOST
	}
	if lim := s.srv.limits().MaxHoldsPerSession; len(s.holds)+s.waiting >= lim {
		s.mu.Unlock()
		return nil, r, protocol.Errorf(protocol.ErrLimit, "session holds or waits for %d names (max_holds_per_session)", lim)
	}
	if w, multi := s.lockLocked(tag); w != nil || (!many && multi != nil) {
		s.mu.Unlock()
		return nil, r, protocol.Errorf(protocol.ErrBadRequest, "tag %s already names a waiting LOCK", tag)
	}
	h, r, lent, after := s.manager.LendCached(s, l, s.whoOf(l.Owner, ""), !many)
	if lent {
		s.holds[locks.HoldKey{Name: name, Owner: l.Owner}] = h
		s.mu.Unlock()
		return nil, r, nil
	}
	w = s.newWaiterLocked(tag, l, many, after)
	s.mu.Unlock()
	if err := s.manager.Join(w); err != nil {
		s.forgetWait(w)
		if !many {
			s.reqs.Done()
		}
		return nil, r, err
	}
	return w, r, nil
}

// newWaiterLocked is the wait of the LOCK tag of l's one name, noted as its
// wait (see pendingLock); after, if not nil, is closed once a release it
// must wait for landed. A wait of a multi-lock (many) is answered on its
// done channel; any other is counted in s.reqs until it is answered. s.mu
// is held.
func (s *session) newWaiterLocked(tag string, l protocol.Lock, many bool, after <-chan struct{}) *locks.Waiter {
	if r := s.releasing[l.Names[0]]; r != nil && after == nil {
		after = r.done
	}
	w := s.manager.NewWaiter(s, tag, l, s.whoOf(l.Owner, l.Value), many, after)
	if !many {
		s.reqs.Add(1) // until LockEnded answers it: a closing session waits for that
	}
	s.pendingLocked(tag).wait = w
	s.waiting++
	return w
}

// whoOf is the who-info a hold of owner of the session records.
func (s *session) whoOf(owner, value string) quorum.Who {
	return quorum.Who{Agent: s.srv.cfg.AgentID, PID: s.cred.PID, UID: s.cred.UID, Owner: owner, Value: value}
}

// Install records a granted hold in the session (the manager made it and
// has the watchdog renew it: see locks.Manager.StartHold), and returns its
// snapshot.
func (s *session) Install(w *locks.Waiter, holder string, g quorum.Grant) (locks.Result, error) {
	s.mu.Lock()
	var afterLost func() // see loseFoundLocked
	defer func() {
		s.mu.Unlock()
		if afterLost != nil {
			afterLost()
		}
	}()
	if s.closing {
		// A grant that came as the session closed: for the agent's stop
		// (a holder's release while stopping granted it), SHUTTING_DOWN.
		return locks.Result{}, s.endedBy()
	}
	key := w.Key()
	if old := s.holds[key]; old != nil {
		// Lost while w's attempt was in flight and not yet forgotten: the
		// client hears LOST before the new grant, which replaces it.
		afterLost = s.loseFoundLocked(old)
		if s.holds[key] == old {
			s.manager.Forget(old)
		}
	}
	h, r := s.manager.StartHold(s, w, holder, g)
	s.holds[key] = h
	s.dropWaitLocked(w) // now counted as a hold
	return r, nil
}

// Reenter: see locks.Client.
func (s *session) Reenter(w *locks.Waiter, claim func(h *locks.Hold) (time.Duration, bool)) (locks.Result, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.holds[w.Key()]
	if h == nil {
		return locks.Result{}, false
	}
	v, ok := claim(h)
	if !ok {
		return locks.Result{}, false
	}
	var r locks.Result
	if err := h.Reenter(w.Lock()); err != nil {
		r = locks.Result{Err: err}
	} else {
		r = h.Snapshot(v)
	}
	s.dropWaitLocked(w)
	return r, true
}

// Adopt: see locks.Client.
func (s *session) Adopt(w *locks.Waiter, take func() *locks.Hold) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := w.Key()
	if s.closing || s.holds[key] != nil {
		return
	}
	if h := take(); h != nil {
		s.holds[key] = h
		s.dropWaitLocked(w)
	}
}

// LockEnded answers w, a LOCK of one name, with r. Whoever moves w out of
// its queue calls it once (see locks.Waiter's end), with no lock held.
func (s *session) LockEnded(w *locks.Waiter, r locks.Result) {
	s.srv.metrics.WaitAnswered(w, r)
	// Before the reply: the client may reuse the tag, and a grant must not
	// count against max_holds_per_session twice.
	s.forgetWait(w)
	tag := w.LockTag()
	t := s.lockAnswering(tag)
	switch {
	case r.Err == nil:
		s.Reply(grantLine(tag, r))
	case errors.Is(r.Err, quorum.ErrBusy):
		s.Reply(protocol.Busy{Tag: tag}.Bytes())
	default:
		s.Reply(protocol.Failed{Tag: tag, Err: r.Err}.Bytes())
	}
	s.finish(t) // after the reply: a request behind it on the hold answers after it
	s.reqs.Done()
}

// withTails gives l the agent's lock.lock_delay when it gave no delay=.
func (v *Server) withTails(l protocol.Lock) protocol.Lock {
	if l.Delay == protocol.NoDelay {
		l.Delay = v.cfg.LockDelay
	}
	return l
}

// finishClaim awaits the result of w, a wait of a multi-lock, or withdraws
// it when stop ends (CANCEL, or the session closing). Only the multi-lock's
// goroutine withdraws it: CANCEL and close may find w in the session's
// waits before it is queued.
func (s *session) finishClaim(stop context.Context, w *locks.Waiter) locks.Result {
	var r locks.Result
	select {
	case r = <-w.Outcome():
	case <-stop.Done():
		s.manager.WithdrawWith(w, locks.Result{Err: stopped(stop)})
		r = <-w.Outcome()
	}
	s.srv.metrics.WaitAnswered(w, r)
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
	deadline := s.srv.clock.Now().Add(l.Wait)
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
	if held, lim := len(s.holds)+s.waiting, s.srv.limits().MaxHoldsPerSession; held+n > lim {
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
	results := make([]locks.Result, len(l.Names))
	var claimed []string
	for _, i := range order {
		one := l
		one.Names = l.Names[i : i+1]
		one.TTL = 0 // no end until all are won: see setEnds
		if l.Wait > 0 && l.Wait != protocol.Forever {
			one.Wait = max(deadline.Sub(s.srv.clock.Now()), time.Millisecond)
		}
		w, r, err := s.claim(tag, one, true)
		if err == nil && w != nil {
			r = s.finishClaim(stop, w)
			err = r.Err
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
func (s *session) setEnds(l protocol.Lock, results []locks.Result) error {
	end := s.srv.clock.Now().Add(l.TTL)
	for i, name := range l.Names {
		if results[i].Count != 1 {
			continue
		}
		s.mu.Lock()
		h := s.holds[locks.HoldKey{Name: name, Owner: l.Owner}]
		s.mu.Unlock()
		ok := false
		if h != nil {
			results[i].Validity, ok = s.manager.SetEnd(h, end)
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
		if s.holds[locks.HoldKey{Name: name, Owner: owner}] == nil {
			continue // lost meanwhile
		}
		if _, d := s.undoLocked(locks.HoldKey{Name: name, Owner: owner}, ""); d != nil {
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
func grantManyLine(tag string, rs []locks.Result) []byte {
	g := protocol.GrantedAll{Tag: tag, Fences: make([]int64, len(rs)), Validity: rs[0].Validity,
		Counts: make([]int, len(rs)), Slots: make([]int, len(rs)), Limit: rs[0].Limit}
	for i, r := range rs {
		g.Fences[i], g.Counts[i], g.Slots[i] = r.Fence, r.Count, r.Slot
		g.Validity = min(g.Validity, r.Validity)
	}
	return g.Bytes()
}

// forgetWait takes w out of its LOCK's record, if it is still there.
func (s *session) forgetWait(w *locks.Waiter) {
	s.mu.Lock()
	s.dropWaitLocked(w)
	s.mu.Unlock()
}

func (s *session) dropWaitLocked(w *locks.Waiter) {
	if p := s.locks[w.LockTag()]; p != nil && p.wait == w {
		p.wait = nil
		s.waiting--
		s.tidyLockLocked(w.LockTag(), p)
	}
}

// stopped is why stop, a multi-lock's context, ended: CANCEL, the session
// closing, or else the agent stopping.
func stopped(stop context.Context) error {
	var perr *protocol.Error
	if err := context.Cause(stop); errors.As(err, &perr) {
		return err
	}
	return locks.ErrAgentStopping
}

func grantLine(tag string, r locks.Result) []byte {
	return protocol.Granted{Tag: tag, Fence: r.Fence, Validity: r.Validity, Count: r.Count, Limit: r.Limit, Slot: r.Slot}.Bytes()
}
