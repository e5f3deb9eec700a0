package server

import (
	"context"
	"errors"
	"slices"

	"github.com/lock-agent/lock-agent/agent/locks"
	"github.com/lock-agent/lock-agent/protocol"
	"github.com/lock-agent/lock-agent/renewal"
)

// The verbs of the protocol but LOCK (lock.go) and those of a connection
// (session.go): each parses its request, checks it against the access
// rules and answers it, with the lock manager's help.

// unlock drops the hold from the session at once, in the order of the
// session's lines. A name passed to a local waiter is answered at once;
// a release in the masters runs in its own goroutine and the reply comes
// when it is done.
func (s *session) unlock(tag string, u protocol.Unlock) error {
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
		h := s.holds[locks.HoldKey{Name: name, Owner: u.Owner}]
		if h == nil {
			s.mu.Unlock()
			return protocol.Errorf(protocol.ErrNotHeld, "%s is not held by this session and owner %q", name, u.Owner)
		}
		if !h.Undoable(u.Mode) {
			s.mu.Unlock()
			return protocol.Errorf(protocol.ErrNotHeld, "%s has no exclusive acquisition left to undo", name)
		}
	}
	counts := make([]int, len(u.Names))
	var left []*undone
	for i, name := range u.Names {
		count, d := s.undoLocked(locks.HoldKey{Name: name, Owner: u.Owner}, u.Mode)
		counts[i] = count
		if d != nil {
			left = append(left, d)
		}
	}
	s.mu.Unlock()
	left = slices.DeleteFunc(left, func(d *undone) bool { return d.now(s) })
	reply := protocol.Released{Tag: tag, Counts: counts}.Bytes()
	if len(left) == 0 {
		s.send(reply)
		return nil
	}
	s.spawn(tag, func() error {
		for _, d := range left {
			d.rest(s)
		}
		s.send(reply)
		return nil
	})
	return nil
}

// extend sets a new end of the hold, ttl from now, at once. No master is
// asked: the hold's records are leases the watchdog renews until its end,
// so moving the end (later or earlier) changes nothing on the masters, and
// the reply's validity is the watchdog's (to the end, or to its deadline if
// renewals fail before).
func (s *session) extend(tag string, e protocol.Extend) error {
	if err := s.allow("extend", e.Name); err != nil {
		return err
	}
	if err := checkTTL(e.TTL); err != nil {
		return err
	}
	s.mu.Lock()
	h := s.holds[locks.HoldKey{Name: e.Name, Owner: e.Owner}]
	s.mu.Unlock()
	if h == nil {
		return protocol.Errorf(protocol.ErrNotHeld, "%s is not held by this session and owner %q", e.Name, e.Owner)
	}
	validity, ok := s.manager.SetEnd(h, s.srv.clock.Now().Add(e.TTL))
	if !ok {
		s.mu.Lock()
		after := s.loseFoundLocked(h)
		s.mu.Unlock()
		if after != nil {
			after()
		}
		return protocol.Errorf(protocol.ErrNotHeld, "%s was lost", e.Name)
	}
	s.send(protocol.Extended{Tag: tag, Validity: validity}.Bytes())
	return nil
}

func (s *session) cancelWait(req *protocol.Request) error {
	tag, err := protocol.ParseCancel(req)
	if err != nil {
		return err
	}
	s.mu.Lock()
	w, multi := s.lockLocked(tag)
	pending, answer := s.cancelPendingLocked(tag) // not in its queue yet: see applyLock
	if pending {
		w, multi = nil, nil
	}
	s.mu.Unlock()
	s.send(protocol.Done{Tag: req.Tag}.Bytes())
	if answer {
		s.send(protocol.Failed{Tag: tag, Err: errCancelled}.Bytes())
	}
	s.withdrawCancelled(w, multi)
	return nil
}

func (s *session) listHolds(req *protocol.Request) error {
	if err := req.NoArgs(); err != nil {
		return err
	}
	s.mu.Lock()
	var lines [][]byte
	for _, h := range s.holds {
		v, _ := s.manager.Validity(h)
		lines = append(lines, h.InfoLine(req.Tag, v))
	}
	s.mu.Unlock()
	for _, l := range lines {
		s.send(l)
	}
	s.send(protocol.Counted{Tag: req.Tag, N: len(lines)}.Bytes())
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
	holders, err := s.manager.Holders(s.ctx, name)
	if err != nil {
		s.srv.metrics.NoQuorumAnswered("who")
		return locks.QuorumError(err)
	}
	var cached []string
	for _, r := range holders {
		if r.Cached { // no client holds it: its agent keeps it for the next (see agent/locks/cache.go)
			cached = append(cached, r.Who.Agent)
			continue
		}
		s.send(protocol.Holder{Tag: tag, Agent: r.Who.Agent, PID: r.Who.PID, UID: r.Who.UID, Owner: r.Who.Owner,
			Mode: string(r.Claim.Mode), Fence: r.Fence, Since: r.Who.SinceMilli, Limit: r.Claim.Limit,
			Slot: r.Claim.Slot, Value: r.Who.Value}.Bytes())
	}
	s.whoDelayed(tag, name)
	end := protocol.Who{Tag: tag, N: len(holders) - len(cached), Cached: cached}
	// Who waits is a round of its own too (see agent/locks/waiters.go).
	end.Waiting, end.WaitingKnown = s.whoWaiting(tag, name)
	// The queue's length is a second round; a WHO without it still says
	// who holds the name.
	if queued, err := s.srv.cluster.QueueLen(s.ctx, name); err == nil {
		end.Queued = queued
	}
	s.send(end.Bytes())
	return nil
}

// whoWaiting sends WHO's line of each agent's waiting record of name and
// returns how many requests they count, or false if no majority answered.
func (s *session) whoWaiting(tag, name string) (int, bool) {
	ws, err := s.srv.cluster.WaitingFor(s.ctx, name)
	if err != nil {
		return 0, false
	}
	total := 0
	for _, w := range ws {
		total += w.Count
		s.send(protocol.Waiting{Tag: tag, Agent: w.Agent, Count: w.Count, Since: w.SinceMilli}.Bytes())
	}
	return total, true
}

// whoDelayed sends WHO's DATA delayed_until=UNIXMS line while a tail of
// name stands on a majority.
func (s *session) whoDelayed(tag, name string) {
	if until, err := s.srv.cluster.DelayedUntil(s.ctx, name); err == nil && until > 0 {
		s.send(protocol.Delayed{Tag: tag, Until: until}.Bytes())
	}
}

// revoke is REVOKE NAME [agent=A] [reason=W]: an operator's verb, allowed
// only by an ACL rule that names it, or to uid 0 when there is no acl
// block. It answers OK n=K once the K revoked holds ended on a majority.
func (s *session) revoke(req *protocol.Request) error {
	v, err := protocol.ParseRevoke(req)
	if err != nil {
		return err
	}
	if err := s.allowRevoke(v.Name); err != nil {
		return err
	}
	s.spawn(req.Tag, func() error {
		ctx, cancel := context.WithTimeout(s.ctx, s.srv.cfg.RevokeBound)
		defer cancel()
		n, err := s.srv.cluster.Revoke(ctx, v.Name, v.Agent, v.Reason)
		s.srv.metrics.Revoked(n)
		switch {
		case err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
			// The bound ran out (a master's own timeout in a round is
			// the round's NO_QUORUM, below, not this).
			return protocol.Errorf(protocol.ErrNoQuorum, "%d holds of %s revoked, not all ended on a majority within %v", n, v.Name, s.srv.cfg.RevokeBound)
		case err != nil:
			return locks.QuorumError(err)
		}
		s.log.Info("revoked", "name", v.Name, "agent", v.Agent, "reason", v.Reason, "holds", n)
		s.send(protocol.Counted{Tag: req.Tag, N: n}.Bytes())
		return nil
	})
	return nil
}

// setValue replaces the value of the session+owner's hold of st.Name, in
// the agent at once and on a majority of the masters before it answers OK.
func (s *session) setValue(tag string, st protocol.Set) error {
	if err := s.allow("set", st.Name); err != nil {
		return err
	}
	s.mu.Lock()
	h := s.holds[locks.HoldKey{Name: st.Name, Owner: st.Owner}]
	s.mu.Unlock()
	held := h != nil
	var err error
	if held {
		held, err = s.manager.SetValue(s.ctx, h, st.Value)
	}
	if !held {
		return protocol.Errorf(protocol.ErrNotHeld, "%s is not held by this session and owner %q", st.Name, st.Owner)
	}
	if err != nil {
		return locks.QuorumError(err)
	}
	s.send(protocol.Done{Tag: tag}.Bytes())
	return nil
}

// check is CHECK NAME fence=F: OK current=true when F is the fence of a
// current holder of NAME as a majority of the masters records it. A run
// of local holders writes its current holder's fence to the masters within
// retagEvery of a hand-over: until then the masters still record the one
// before. A cache's lendings reach the masters only at its agent's next
// note (locks.Manager.NoteCaches): they count a fence above the noted one of a cache's
// exclusive record as current. This agent answers for its own (ownCheck).
func (s *session) check(req *protocol.Request) error {
	c, err := protocol.ParseCheck(req)
	if err != nil {
		return err
	}
	if err := s.allow("check", c.Name); err != nil {
		return err
	}
	s.spawn(req.Tag, func() error {
		current, err := s.manager.Check(s.ctx, c.Name, c.Fence)
		if err != nil {
			return locks.QuorumError(err)
		}
		s.send(protocol.Checked{Tag: req.Tag, Current: current}.Bytes())
		return nil
	})
	return nil
}

// observe is OBSERVE NAME: OK, then the name's leader as read after the
// OBSERVE arrived, and at every change.
func (s *session) observe(req *protocol.Request) error {
	name, err := protocol.ParseObserve(req)
	if err != nil {
		return err
	}
	if err := s.allow("observe", name); err != nil {
		return err
	}
	return s.manager.Observe(s, name, s.srv.limits().MaxHoldsPerSession, protocol.Done{Tag: req.Tag}.Bytes())
}

// unobserve is UNOBSERVE NAME: OK, and no push of the name after it.
func (s *session) unobserve(req *protocol.Request) error {
	name, err := protocol.ParseObserve(req)
	if err != nil {
		return err
	}
	s.manager.Unobserve(s, name)
	s.send(protocol.Done{Tag: req.Tag}.Bytes())
	return nil
}

// tellLostLocked takes the lost h out of s's holds and tells the client,
// if h is still one of them, and returns the LOST line's number in s's
// outbox (0 if h was not one of them). s.mu is held.
func (s *session) tellLostLocked(h *locks.Hold, loss renewal.Loss) (told uint64) {
	if s.holds[h.Key()] != h {
		return 0
	}
	delete(s.holds, h.Key())
	// Queued before s.mu is let go: an UNLOCK that finds the hold gone
	// (it looks under s.mu) answers NOT_HELD after the client heard why.
	// push never blocks, so it may run under s.mu (s.mu before s.out.mu).
	s.srv.metrics.Lost(loss.Reason) // counted before the client can hear of it
	return s.out.Push(locks.LostLine(h, loss))
}

// TellLost: see locks.Client.
func (s *session) TellLost(h *locks.Hold, loss renewal.Loss) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tellLostLocked(h, loss)
}

// loseFoundLocked tells the client LOST of h, one of s's holds, if the
// watchdog found it lost (or it was revoked) and the manager's lose has not
// come yet (see locks.Manager.LostNow). The caller calls the returned func, if
// any, once s.mu is let go. s.mu is held.
func (s *session) loseFoundLocked(h *locks.Hold) (after func()) {
	if s.holds[h.Key()] != h {
		return nil
	}
	loss, tell := s.manager.LostNow(h)
	if !tell {
		return nil
	}
	told := s.tellLostLocked(h, loss)
	return func() { s.manager.AfterLost(h, loss, told) }
}

// undone is what is left to do of an UNLOCK once the session let go of
// the hold: a downgrade in the masters, or the release of h's name, whose
// lent record may go on to a local waiter or back to its cache (see
// agent/locks/lend.go), or else is released in the masters.
type undone struct {
	h         *locks.Hold
	downgrade bool
	rel       *pendingRelease // the session's note that the name is on its way out
	// rollback says the acquisition undone was never answered (a
	// multi-lock that failed): its hold leaves no tail (delay=, min_hold=).
	rollback bool
}

// now does what needs no master, at once: it gives a lent record back (see
// locks.Manager.GiveBack) if it may. It says whether that was all.
func (d *undone) now(s *session) bool {
	if d.downgrade || !s.manager.GiveBack(d.h) {
		return false
	}
	s.releaseDone(d.h.Name(), d.rel)
	return true
}

// rest does what is left, in the masters, after now; it may wait for them.
func (d *undone) rest(s *session) {
	h := d.h
	if d.downgrade {
		if err := s.manager.Downgrade(s.ctx, h); err != nil {
			s.log.Warn("downgrade did not reach a majority; the hold stays exclusive in the masters", "name", h.Name(), "error", err)
		}
		return
	}
	s.manager.LetGo(s.ctx, h, d.rollback)
	s.releaseDone(h.Name(), d.rel)
}

// undoLocked undoes the most recent acquisition of key (the most recent
// exclusive one, for mode exclusive), which the caller checked exists, and
// returns the count left and what remains to do (a release or a downgrade;
// nil if nothing). s.mu is held.
func (s *session) undoLocked(key locks.HoldKey, mode protocol.Mode) (int, *undone) {
	h := s.holds[key]
	count, downgraded := h.Undo(mode)
	if downgraded {
		s.manager.Downgraded(h) // the masters' record becomes shared: no exclusive holder may inherit it
		return count, &undone{h: h, downgrade: true}
	}
	if count > 0 {
		return count, nil
	}
	delete(s.holds, key)
	return 0, &undone{h: h, rel: s.releaseStarted(key.Name)}
}

// releaseStarted notes a release of name on its way to the masters. s.mu is held.
func (s *session) releaseStarted(name string) *pendingRelease {
	r := s.releasing[name]
	if r == nil {
		if s.releasing == nil {
			s.releasing = map[string]*pendingRelease{}
		}
		r = &pendingRelease{done: make(chan struct{})}
		s.releasing[name] = r
	}
	r.n++
	return r
}

// releaseDone notes that a release of name landed.
func (s *session) releaseDone(name string, r *pendingRelease) {
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

// FindHold: see locks.Client.
func (s *session) FindHold(holder string) *locks.Hold {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range s.holds {
		if h.Holds(holder) {
			return h
		}
	}
	return nil
}

// PushFor: see locks.Client.
func (s *session) PushFor(h *locks.Hold, ok func() bool, line []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holds[h.Key()] != h || !ok() {
		return false
	}
	s.Push(line)
	return true
}
