package server

import (
	"context"

	"github.com/lock-agent/lock-agent/agent/locks"
	"github.com/lock-agent/lock-agent/protocol"
)

// The order of one session's requests on a hold. Requests take effect in
// the order their lines arrive, and most take effect at once (see
// dispatch). A LOCK may take a while: it waits for the name, or for the
// masters even when the name is free. A request on the same hold (name and
// owner) that arrives while a LOCK of it is unanswered waits for that
// answer, then takes effect as if its line arrived just then: an UNLOCK or
// an EXTEND finds the hold the LOCK made (or, if it was not granted, none),
// a second LOCK re-enters it or tries for the name anew. A WHO of the name
// waits for the session's unanswered LOCKs of it, whatever their owner, and
// for its releases of it to land. Only that request waits: other names' and
// other owners' requests go on, and it never holds up a line it follows.

// turn is an unfinished request on holds whose later requests on them
// wait for it: a LOCK until it is answered, any other request until it has
// taken effect. Its fields but done are guarded by the session's mu.
type turn struct {
	done chan struct{} // closed when it is finished
	keys []locks.HoldKey
	seq  uint64 // its place in the session's order of arrival
	// tag, for a LOCK, is its tag: its pendingLock has it until its
	// answer is about to be queued.
	tag  string
	lock bool
	// A LOCK is started when it begins to take effect, in its own
	// goroutine if it waited for its turn, and applied once it has joined
	// its queue or was answered (see applyLock). In between, its waiter
	// may be in its pendingLock but not yet in its queue, where CANCEL
	// and the session's end cannot withdraw it: they set cancelled, or
	// closing, and applyLock withdraws it once it is applied.
	started, applied, cancelled bool
	// answered, for a LOCK, says that its reply is being queued: it is
	// finished as soon as it is, so a request behind it waits for nothing
	// the client has not seen answered: on the reader's goroutine (see
	// priorLocked), or, for a WHO, unlimited (see admitBehindLocked).
	answered bool
}

// pendingLock is one unanswered LOCK of the session, under its tag: what
// CANCEL, the session's end and the limits look at. Each part is set where
// it starts and cleared where it ends, and the record goes with the last
// (tidyLockLocked). Guarded by the session's mu.
type pendingLock struct {
	// turn is the LOCK's turn (see turn) until its answer is about to be
	// queued (see lockAnswering).
	turn *turn
	// wait is its wait in its name's queue (for a multi-lock, the wait of
	// the name it claims now), from the claim until its end is answered.
	wait *locks.Waiter
	// multi ends a multi-lock's goroutine (CANCEL, the agent stopping),
	// until it has answered.
	multi context.CancelCauseFunc
}

// pendingLocked is the record of the LOCK tag, made if there was none.
// s.mu is held.
func (s *session) pendingLocked(tag string) *pendingLock {
	p := s.locks[tag]
	if p == nil {
		if s.locks == nil {
			s.locks = map[string]*pendingLock{}
		}
		p = &pendingLock{}
		s.locks[tag] = p
	}
	return p
}

// tidyLockLocked drops p, the record of the LOCK tag, once nothing is left
// of it. s.mu is held.
func (s *session) tidyLockLocked(tag string, p *pendingLock) {
	if p.turn == nil && p.wait == nil && p.multi == nil && s.locks[tag] == p {
		delete(s.locks, tag)
	}
}

// lockLocked is the wait and the multi-lock's cancel of the LOCK tag, nil
// if it has none. s.mu is held.
func (s *session) lockLocked(tag string) (*locks.Waiter, context.CancelCauseFunc) {
	if p := s.locks[tag]; p != nil {
		return p.wait, p.multi
	}
	return nil, nil
}

// lockTurnLocked is the turn of the LOCK tag, nil if it has none. s.mu is
// held.
func (s *session) lockTurnLocked(tag string) *turn {
	if p := s.locks[tag]; p != nil {
		return p.turn
	}
	return nil
}

// endMultiLocked notes that the multi-lock tag has ended. s.mu is held.
func (s *session) endMultiLocked(tag string) {
	if p := s.locks[tag]; p != nil && p.multi != nil {
		p.multi = nil
		s.multis--
		s.tidyLockLocked(tag, p)
	}
}

// waitsToEndLocked is the waits that a closing session, or a stopping
// agent, ends itself: a multi-lock's goroutine withdraws its own (see
// finishClaim), as a LOCK joining its queue in its own goroutine does (see
// applyLock). s.mu is held.
func (s *session) waitsToEndLocked() []*locks.Waiter {
	waits := make([]*locks.Waiter, 0, s.waiting)
	for tag, p := range s.locks {
		if w := p.wait; w != nil && !w.Multi() && !s.joiningLocked(tag) {
			waits = append(waits, w)
		}
	}
	return waits
}

// priorLocked is what a request on keys must wait for: the last unfinished
// request on each. s.mu is held.
//
// A LOCK whose reply is being queued (answered) is finished a moment
// later, but the client may have read the reply and sent its next lines
// already: an UNLOCK of the hold, then a HOLDS. So a request whose only
// prior turns are answered LOCKs waits for them here, on the reader's
// goroutine, and takes effect before the next line is read, as every
// request whose turn has come does (a HOLDS after the UNLOCK saw the hold
// still there, under load). The wait is for the few steps between queuing
// a reply and finishing its turn: a reply that waits for room in the
// outbox (send) makes the reader wait as its own AwaitRoom would.
func (s *session) priorLocked(keys []locks.HoldKey) []*turn {
	for {
		prior := s.lastTurnsLocked(keys)
		if !allAnswered(prior) {
			return prior
		}
		s.mu.Unlock()
		if awaitingAnswered != nil {
			awaitingAnswered()
		}
		awaitAll(prior)
		s.mu.Lock()
	}
}

// awaitingAnswered, if set (by a test), is called as the reader begins to
// wait for answered LOCKs in priorLocked.
var awaitingAnswered func()

// lastTurnsLocked is the last unfinished request on each of keys. s.mu is
// held.
func (s *session) lastTurnsLocked(keys []locks.HoldKey) []*turn {
	var prior []*turn
	for _, k := range keys {
		if t := s.turns[k]; t != nil {
			prior = append(prior, t)
		}
	}
	return prior
}

// takeTurnLocked makes t the last request on its keys. s.mu is held.
func (s *session) takeTurnLocked(t *turn) {
	s.turnSeq++
	t.seq = s.turnSeq
	if s.turns == nil {
		s.turns = map[locks.HoldKey]*turn{}
	}
	for _, k := range t.keys {
		s.turns[k] = t
	}
	if t.lock {
		s.pendingLocked(t.tag).turn = t
	}
}

// finish ends t, if not nil: the requests after it on its keys go on.
func (s *session) finish(t *turn) {
	if t == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.finishLocked(t)
}

func (s *session) finishLocked(t *turn) {
	select {
	case <-t.done:
		return
	default:
	}
	close(t.done)
	for _, k := range t.keys {
		if s.turns[k] == t {
			delete(s.turns, k)
		}
	}
	s.untagLocked(t)
	if len(s.turns) == 0 && s.turnsEnded != nil {
		close(s.turnsEnded)
		s.turnsEnded = nil
	}
}

// lockAnswering is called just before the final reply of the LOCK tag is
// queued: the tag is free again (the client may reuse it once it has the
// reply). It returns the LOCK's turn, which the caller finishes once the
// reply is queued, so that a request behind it answers after it.
func (s *session) lockAnswering(tag string) *turn {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.lockTurnLocked(tag)
	if t != nil {
		t.answered = true
		s.untagLocked(t)
	}
	return t
}

// answerLock queues line, the final reply of the LOCK tag that answers
// where it runs (a re-entry, a multi-name LOCK), in its turn: see
// lockAnswering.
func (s *session) answerLock(tag string, line []byte) {
	t := s.lockAnswering(tag)
	s.send(line)
	s.finish(t)
}

func (s *session) untagLocked(t *turn) {
	if p := s.locks[t.tag]; t.lock && p != nil && p.turn == t {
		p.turn = nil
		s.tidyLockLocked(t.tag, p)
	}
}

func awaitAll(prior []*turn) {
	for _, t := range prior {
		<-t.done
	}
}

func keysOf(names []string, owner string) []locks.HoldKey {
	keys := make([]locks.HoldKey, len(names))
	for i, name := range names {
		keys[i] = locks.HoldKey{Name: name, Owner: owner}
	}
	return keys
}

// lockInTurn is a LOCK: it is the last request on its holds until it is
// answered, and joins its queues once the requests before it on them are
// finished.
func (s *session) lockInTurn(req *protocol.Request) error {
	l, err := protocol.ParseLock(req)
	if err != nil {
		return err
	}
	t := &turn{done: make(chan struct{}), keys: keysOf(l.Names, l.Owner), tag: req.Tag, lock: true}
	s.mu.Lock()
	if s.lockTurnLocked(req.Tag) != nil {
		s.mu.Unlock()
		return protocol.Errorf(protocol.ErrBadRequest, "tag %s already names a waiting LOCK", req.Tag)
	}
	prior := s.priorLocked(t.keys)
	if len(prior) > 0 {
		if err := s.admitBehindLocked(prior); err != nil {
			s.mu.Unlock()
			return err
		}
	}
	s.takeTurnLocked(t)
	s.mu.Unlock()
	if len(prior) == 0 {
		s.applyLock(req.Tag, l, t)
		return nil
	}
	s.reqs.Add(1)
	go func() {
		defer s.reqs.Done()
		s.awaitTurn(prior)
		s.applyLock(req.Tag, l, t)
	}()
	return nil
}

// admitBehindLocked counts a request that waits for its turn behind
// prior, unless the session has max_holds_per_session names held, LOCKs
// waiting and requests waiting for their turn already: each costs the
// agent a goroutine until its turn comes. A WHO behind a LOCK whose
// reply is being queued only (the client sent it on reading the reply,
// before the LOCK's turn was finished) is not limited: it waits for
// nothing the client can see (the other requests wait for such a LOCK on
// the reader's goroutine: see priorLocked). s.mu is held.
func (s *session) admitBehindLocked(prior []*turn) error {
	lim := s.srv.limits().MaxHoldsPerSession
	if len(s.holds)+s.waiting+s.behind >= lim && !allAnswered(prior) {
		return protocol.Errorf(protocol.ErrLimit, "session holds, waits for or has requests waiting for their turn on %d names (max_holds_per_session)", lim)
	}
	s.behind++
	return nil
}

// allAnswered says whether every turn of prior is a LOCK whose reply is
// being queued (see lockAnswering). s.mu is held.
func allAnswered(prior []*turn) bool {
	for _, t := range prior {
		if !t.answered {
			return false
		}
	}
	return len(prior) > 0
}

// awaitTurn waits until prior are finished: the request's turn has come.
func (s *session) awaitTurn(prior []*turn) {
	awaitAll(prior)
	s.mu.Lock()
	s.behind--
	s.mu.Unlock()
}

// applyLock lets the LOCK of t take effect, unless a CANCEL came first,
// and withdraws it if a CANCEL, or the session's end, came while it was
// joining its queue.
func (s *session) applyLock(tag string, l protocol.Lock, t *turn) {
	s.mu.Lock()
	cancelled := t.cancelled
	t.started = true
	s.mu.Unlock()
	if cancelled { // and answered: see cancelPendingLocked
		s.finish(t)
		return
	}
	err := s.lock(tag, l)
	s.mu.Lock()
	t.applied = true
	cancelled, closing := t.cancelled, s.closing
	w, multi := s.lockLocked(tag)
	s.mu.Unlock()
	switch {
	case err != nil:
		s.lockAnswering(tag)
		s.send(protocol.Failed{Tag: tag, Err: err}.Bytes())
		s.finish(t)
	case cancelled:
		s.withdrawCancelled(w, multi)
	case closing && w != nil && !w.Multi():
		s.manager.WithdrawWith(w, locks.Result{Err: s.endedBy()})
	}
}

// endedBy is why the session's waits end when it closes: the agent is
// stopping (see bye; the session closes after), or else it was closed.
func (s *session) endedBy() error {
	if s.shutdown.Load() || s.ctx.Err() == nil {
		return locks.ErrAgentStopping
	}
	return errSessionGone
}

// joiningLocked says whether the LOCK tag is joining its queue in its own
// goroutine, which withdraws it if need be (see applyLock). s.mu is held.
func (s *session) joiningLocked(tag string) bool {
	t := s.lockTurnLocked(tag)
	return t != nil && t.started && !t.applied
}

// cancelPendingLocked notes a CANCEL of the LOCK tag, and says whether it
// took it on: the LOCK still waits for its turn or is joining its queue.
// One still waiting for its turn is answered CANCELLED now (answer), and
// ends there without taking effect, so that the requests behind it still
// wait for the ones before it; one joining its queue is withdrawn by
// applyLock. s.mu is held.
func (s *session) cancelPendingLocked(tag string) (pending, answer bool) {
	t := s.lockTurnLocked(tag)
	if t == nil || t.applied {
		return false, false
	}
	t.cancelled = true
	if t.started {
		return true, false
	}
	s.untagLocked(t)
	return true, true
}

// inTurn runs apply, the effect of a request on keys, once the requests
// before it on them are finished: at once if there are none. Until then it
// is the last request on keys.
func (s *session) inTurn(tag string, keys []locks.HoldKey, apply func() error) error {
	s.mu.Lock()
	prior := s.priorLocked(keys)
	if len(prior) == 0 {
		s.mu.Unlock()
		return apply()
	}
	if err := s.admitBehindLocked(prior); err != nil {
		s.mu.Unlock()
		return err
	}
	t := &turn{done: make(chan struct{}), keys: keys}
	s.takeTurnLocked(t)
	s.mu.Unlock()
	s.reqs.Add(1)
	go func() {
		defer s.reqs.Done()
		s.awaitTurn(prior)
		if err := apply(); err != nil {
			s.send(protocol.Failed{Tag: tag, Err: err}.Bytes())
		}
		s.finish(t)
	}()
	return nil
}

func (s *session) unlockInTurn(req *protocol.Request) error {
	u, err := protocol.ParseUnlock(req)
	if err != nil {
		return err
	}
	return s.inTurn(req.Tag, keysOf(u.Names, u.Owner), func() error { return s.unlock(req.Tag, u) })
}

func (s *session) extendInTurn(req *protocol.Request) error {
	e, err := protocol.ParseExtend(req)
	if err != nil {
		return err
	}
	return s.inTurn(req.Tag, keysOf([]string{e.Name}, e.Owner), func() error { return s.extend(req.Tag, e) })
}

// whoInTurn answers a WHO once the earliest of the session's unfinished
// requests on holds of the name (an unanswered LOCK, whatever its owner)
// is finished and its releases of the name landed, so that it sees what
// it did. Until it is answered, the session's later requests on the holds
// it waited for, or, if it waited for none, on the holds the session has
// of the name, wait for it: it sees them before they are undone. It waits
// for the earliest only: a later LOCK of the name by another owner may be
// waiting for a hold of this session that a line after the WHO releases
// (LOCK x owner=a, LOCK x owner=b, WHO x, UNLOCK x owner=a), and waiting
// for it would hold up that UNLOCK behind the WHO for ever. Every wait is
// then for an earlier line, or a LOCK's for another owner's hold, whose
// requests never wait for this WHO: no cycle.
func (s *session) whoInTurn(req *protocol.Request) error {
	name, err := protocol.ParseWho(req)
	if err != nil {
		return err
	}
	s.mu.Lock()
	t, prior := s.whoTurnLocked(name)
	releasing := s.releasing[name] != nil
	if len(t.keys) == 0 && !releasing {
		s.mu.Unlock()
		return s.who(req)
	}
	if len(prior) == 0 && !releasing {
		// It waits for nothing, only holds up later requests on the
		// holds: not limited, so a session at its limit may still ask.
		s.behind++
	} else if err := s.admitBehindLocked(prior); err != nil {
		s.mu.Unlock()
		return err
	}
	s.takeTurnLocked(t)
	s.mu.Unlock()
	s.reqs.Add(1)
	go func() {
		defer s.reqs.Done()
		defer s.finish(t)
		s.whoAfter(req.Tag, name, prior)
	}()
	return nil
}

// whoTurnLocked is the turn a WHO of name would take: on the holds of the
// name whose last unfinished request is the earliest of those (prior), or
// if none has one, on the session's holds of the name. s.mu is held.
func (s *session) whoTurnLocked(name string) (t *turn, prior []*turn) {
	t = &turn{done: make(chan struct{})}
	var first *turn
	for k, p := range s.turns {
		if k.Name == name && (first == nil || p.seq < first.seq) {
			first = p
		}
	}
	if first != nil {
		for _, k := range first.keys {
			if k.Name == name {
				t.keys = append(t.keys, k)
			}
		}
		return t, []*turn{first}
	}
	for k := range s.holds {
		if k.Name == name {
			t.keys = append(t.keys, k)
		}
	}
	return t, nil
}

// whoAfter answers the WHO tag of name once prior are finished and the
// session's releases of the name have landed.
func (s *session) whoAfter(tag, name string, prior []*turn) {
	s.awaitTurn(prior)
	s.mu.Lock()
	r := s.releasing[name]
	s.mu.Unlock()
	if r != nil {
		<-r.done
	}
	err := s.allow("who", name)
	if err == nil {
		err = s.whoReply(tag, name)
	}
	if err != nil {
		s.send(protocol.Failed{Tag: tag, Err: err}.Bytes())
	}
}

// cancelTag withdraws the LOCK tag, which a CANCEL found before it joined
// its queue, now that it has.
func (s *session) cancelTag(tag string) {
	s.mu.Lock()
	w, multi := s.lockLocked(tag)
	s.mu.Unlock()
	s.withdrawCancelled(w, multi)
}

// withdrawCancelled ends the wait of a cancelled LOCK: w, or multi for a
// multi-lock, whose goroutine withdraws its wait (see finishClaim).
func (s *session) withdrawCancelled(w *locks.Waiter, multi context.CancelCauseFunc) {
	switch {
	case multi != nil:
		multi(errCancelled)
	case w != nil:
		s.manager.WithdrawWith(w, locks.Result{Err: errCancelled})
	}
}

// setInTurn is a SET: it takes effect once the requests before it on the
// hold are finished, as UNLOCK and EXTEND do, and the requests after it on
// the hold (a WHO of the name too) wait until it is answered, so that an
// UNLOCK behind it is not overtaken by its round, nor a WHO behind it
// shown the old value.
func (s *session) setInTurn(req *protocol.Request) error {
	st, err := protocol.ParseSet(req)
	if err != nil {
		return err
	}
	t := &turn{done: make(chan struct{}), keys: keysOf([]string{st.Name}, st.Owner)}
	s.mu.Lock()
	prior := s.priorLocked(t.keys)
	if len(prior) > 0 {
		if err := s.admitBehindLocked(prior); err != nil {
			s.mu.Unlock()
			return err
		}
	}
	s.takeTurnLocked(t)
	s.mu.Unlock()
	s.spawn(req.Tag, func() error {
		if len(prior) > 0 {
			s.awaitTurn(prior)
		}
		if err := s.setValue(req.Tag, st); err != nil {
			s.send(protocol.Failed{Tag: req.Tag, Err: err}.Bytes())
		}
		s.finish(t) // after the answer: a request behind it answers after it
		return nil
	})
	return nil
}
