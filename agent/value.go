package agent

import (
	"math"

	"github.com/lock-agent/lock-agent/protocol"
	"github.com/lock-agent/lock-agent/quorum"
)

// A hold's value (LOCK value=, SET) and the fence check (CHECK): see
// ../shared/coordination.md §1 and §5. The value lives in the holder's
// record on the masters; the agent keeps it in the hold's record for the
// watchdog (which re-creates the record where a master lacks it) and, for
// a name passed among local holders, in the run's record (which a
// hand-over writes, the new holder's value with it). A re-entrant LOCK's
// value= is ignored: the hold keeps its value until a SET.

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

// setValue replaces the value of the session+owner's hold of st.Name, in
// the agent at once and on a majority of the masters before it answers OK.
func (s *session) setValue(tag string, st protocol.Set) error {
	if err := s.allow("set", st.Name); err != nil {
		return err
	}
	s.mu.Lock()
	h := s.holds[holdKey{st.Name, st.Owner}]
	s.mu.Unlock()
	if h == nil || !s.a.recordValue(h, st.Value) {
		return protocol.Errorf(protocol.ErrNotHeld, "%s is not held by this session and owner %q", st.Name, st.Owner)
	}
	if err := s.a.cluster.SetValue(s.ctx, st.Name, h.rh.Holder, st.Value); err != nil {
		return quorumError(err)
	}
	s.send(protocol.Done{Tag: tag}.Bytes())
	return nil
}

// recordValue makes value the value of h's records in the agent: the one
// the watchdog re-creates, and its run's (see cohort.go), which is written
// to the masters again so that a hand-over's write in flight does not
// leave the old value. It says false if h is no longer live (lost, let go
// or passed on).
func (a *Agent) recordValue(h *hold, value string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if holderOf(h.rh) != h || !a.watchdog.UpdateRecord(h.rh, func(r *quorum.Record) { r.Who.Value = value }) {
		return false
	}
	h.cacheable = false // a record with a value is not cached (see cache.go)
	switch l := h.lent; {
	case l == nil:
	case l.policy == lendLinger && l.holder == h:
		l.record.Who.Value = value
	case l.policy == lendRun && a.lendsLocked(l):
		l.record.Who.Value = value
		a.retagLocked(l)
	}
	return true
}

// check is CHECK NAME fence=F: OK current=true when F is the fence of a
// current holder of NAME as a majority of the masters records it. A run
// of local holders writes its current holder's fence to the masters within
// retagEvery of a hand-over: until then the masters still record the one
// before. A cache's lendings reach the masters only at its agent's next
// note (noteCaches): they count a fence above the noted one of a cache's
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
		current, mine := s.a.ownCheck(c.Name, c.Fence)
		if !mine && c.Fence <= math.MaxInt64 { // no fence is larger
			if current, err = s.a.cluster.Check(s.ctx, c.Name, int64(c.Fence)); err != nil {
				return quorumError(err)
			}
		}
		s.send(protocol.Checked{Tag: req.Tag, Current: current}.Bytes())
		return nil
	})
	return nil
}
