package agent

// The verbs of the protocol but LOCK (lock.go) and those of a connection
// (session.go): each parses its request, checks it against the access
// rules and answers it, with the lock manager's help.

import "github.com/lock-agent/lock-agent/protocol"

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
	a := s.a
	a.mu.Lock()
	defer a.mu.Unlock()
	o := s.observing[name]
	if o == nil {
		if lim := a.limits().MaxHoldsPerSession; len(s.observing) >= lim {
			return protocol.Errorf(protocol.ErrLimit, "session observes %d names (max_holds_per_session)", lim)
		}
		o = a.observationLocked(name)
		o.sessions[s] = struct{}{}
		if s.observing == nil {
			s.observing = map[string]*observation{}
		}
		s.observing[name] = o
		a.metrics.Observers.Inc()
	}
	delete(o.sessions, s)
	o.joining[s] = o.reads
	s.reply(protocol.Done{Tag: req.Tag}.Bytes())
	select {
	case o.poke <- struct{}{}:
	default:
	}
	return nil
}

// unobserve is UNOBSERVE NAME: OK, and no push of the name after it.
func (s *session) unobserve(req *protocol.Request) error {
	name, err := protocol.ParseObserve(req)
	if err != nil {
		return err
	}
	s.a.mu.Lock()
	if o := s.observing[name]; o != nil {
		s.a.unobserveLocked(s, o)
	}
	s.a.mu.Unlock()
	s.send(protocol.Done{Tag: req.Tag}.Bytes())
	return nil
}
