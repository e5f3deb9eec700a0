package agent

import "github.com/lock-agent/lock-agent/agent/acl"

// live is what a SIGHUP changes in a running agent. It is replaced whole,
// never changed in place: the request paths read it with Agent.live.Load
// and no lock.
type live struct {
	limits Limits
	acl    *acl.ACL
}

// limits are the limits in force now.
func (a *Agent) limits() Limits { return a.live.Load().limits }

// SetLive applies cfg's limits and access rules to the running agent; the
// rest of cfg is ignored (it takes a restart). Requests that arrive after
// it returns see them. What was admitted before is kept: sessions, holds
// and waits over a lowered limit, or that new rules would deny, go on
// until they end; a session's idle_timeout is measured anew.
func (a *Agent) SetLive(cfg Config) {
	old := a.live.Swap(&live{limits: cfg.Limits, acl: cfg.ACL})
	if old.limits.IdleTimeout == cfg.Limits.IdleTimeout {
		return
	}
	a.mu.Lock()
	sessions := make([]*session, 0, len(a.sessions))
	for _, s := range a.sessions {
		sessions = append(sessions, s)
	}
	a.mu.Unlock()
	for _, s := range sessions {
		s.armIdle()
	}
}

// allow checks a request against the rules in force now (a SIGHUP may
// replace them). The peer's groups are looked up once per session, when a
// rule first needs them.
func (s *session) allow(verb string, names ...string) error {
	rules := s.a.live.Load().acl
	if rules == nil {
		return nil
	}
	s.peerOnce.Do(func() { s.peer = acl.Resolve(s.cred.UID, s.cred.GID) })
	err := rules.Allow(s.peer, verb, names...)
	if err != nil {
		s.log.Debug("denied", "reason", err)
	}
	return err
}
