package agent

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/lock-agent/lock-agent/protocol"
	"github.com/lock-agent/lock-agent/quorum"
	"github.com/lock-agent/lock-agent/renewal"
)

// Tails: a hold with delay= (or lock.lock_delay) or min_hold= keeps its
// name unavailable after it ends (quorum.Tail). The masters keep the tail;
// the agent says how each hold ended: an UNLOCK is clean, anything else
// (the session closed, the hold was lost or revoked) is not.

// withTails gives l the agent's lock.lock_delay when it gave no delay=.
func (a *Agent) withTails(l protocol.Lock) protocol.Lock {
	if l.Delay == protocol.NoDelay {
		l.Delay = a.cfg.Lock.LockDelay
	}
	return l
}

// tailOf is the tail a LOCK asks for.
func tailOf(l protocol.Lock) quorum.Tail {
	return quorum.Tail{Delay: max(l.Delay, 0), MinHold: l.MinHold}
}

// endHold ends rh's record in the masters: a release for a hold without a
// tail (a hand-over, if handOver: see cohort.go), else an end that leaves
// its tail (see quorum.Cluster.End); clean says it was an UNLOCK. Then the
// name's local waiters try at once.
func (a *Agent) endHold(ctx context.Context, rh *renewal.Hold, clean, handOver bool) {
	if !rh.Tail {
		a.release(ctx, rh.Name, rh.Holder, handOver)
		return
	}
	tail, err := a.cluster.End(ctx, rh.Name, rh.Holder, clean)
	if err != nil {
		a.log.Warn("end of a hold reached no master; its lease and delay will expire", "name", rh.Name, "error", err)
	}
	if tail {
		a.metrics.TailBegun()
	}
	a.pokeQueue(rh.Name)
}

// pokeQueue lets name's local waiters try at once.
func (a *Agent) pokeQueue(name string) {
	if q := a.queueOf(name); q != nil {
		q.poke()
	}
}

// endTailed ends holds with a tail that a closing session left (see
// releaseAll), all at once: not clean.
func (a *Agent) endTailed(holds []*renewal.Hold) {
	var wg sync.WaitGroup
	for _, rh := range holds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.endHold(context.Background(), rh, false, false)
		}()
	}
	wg.Wait()
}

// onRevoke is the masters' word that REVOKE (on any agent) ended the hold
// whose record is holder's: if it is one of this agent's, its client is
// told LOST with the reason, then the hold ends (its delay applies). The
// renewal would find it gone anyway, within a third of a lease. It is
// called from a master's subscriber: it must not block.
func (a *Agent) onRevoke(holder, reason string) {
	go func() {
		rh := a.findHold(holder)
		if rh == nil || !a.watchdog.Revoke(rh, reason) {
			return // not this agent's, or told already (every master delivers it)
		}
		a.lose(rh, renewal.Revocation(reason))
	}()
}

// findHold is the watched record of holder among the sessions' holds, or nil.
func (a *Agent) findHold(holder string) *renewal.Hold {
	sessions := a.openSessions()
	for _, s := range sessions {
		s.mu.Lock()
		for _, h := range s.holds {
			if h.rh.Holder == holder {
				s.mu.Unlock()
				return h.rh
			}
		}
		s.mu.Unlock()
	}
	return nil
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
		ctx, cancel := context.WithTimeout(s.ctx, s.a.revokeBound())
		defer cancel()
		n, err := s.a.cluster.Revoke(ctx, v.Name, v.Agent, v.Reason)
		s.a.metrics.Revoked(n)
		switch {
		case err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
			// The bound ran out (a master's own timeout in a round is
			// the round's NO_QUORUM, below, not this).
			return protocol.Errorf(protocol.ErrNoQuorum, "%d holds of %s revoked, not all ended on a majority within %v", n, v.Name, s.a.revokeBound())
		case err != nil:
			return quorumError(err)
		}
		s.log.Info("revoked", "name", v.Name, "agent", v.Agent, "reason", v.Reason, "holds", n)
		s.send(protocol.Counted{Tag: req.Tag, N: n}.Bytes())
		return nil
	})
	return nil
}

// revokeBound is how long REVOKE waits for the holds it revoked to end: a
// revoked record that its agent does not end expires within a lease (it
// can no longer be renewed), and a bit.
func (a *Agent) revokeBound() time.Duration { return Quarantine(a.cfg.Lock) + time.Second }

// allowRevoke says whether the peer may REVOKE name: a rule must name the
// verb revoke (a rule without verbs does not grant it); without an acl
// block, only uid 0 may.
func (s *session) allowRevoke(name string) error {
	if s.a.live.Load().acl == nil {
		if s.cred.UID != 0 {
			return protocol.Errorf(protocol.ErrDenied, "revoke is for uid 0 when there is no acl block; uid %d", s.cred.UID)
		}
		return nil
	}
	return s.allow("revoke", name)
}

// whoDelayed sends WHO's DATA delayed_until=UNIXMS line while a tail of
// name stands on a majority.
func (s *session) whoDelayed(tag, name string) {
	if until, err := s.a.cluster.DelayedUntil(s.ctx, name); err == nil && until > 0 {
		s.send(protocol.Delayed{Tag: tag, Until: until}.Bytes())
	}
}
