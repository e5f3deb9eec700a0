package agent

import (
	"context"
	"errors"
	"time"

	"github.com/lock-agent/lock-agent/protocol"
	"github.com/lock-agent/lock-agent/quorum"
)

// Observers (OBSERVE, UNOBSERVE, * LEADER: ../shared/coordination.md §2).
// However many of its sessions observe a name, the agent keeps one
// observation of it: one subscription to the name's channel (a
// quorum.Watch), one mark on the masters that makes a grant of the name
// await its agent's word there, which publishes
// (quorum.Cluster.MarkObserved, renewed every lease/3 while the name is
// observed, then left to expire: another agent may observe it too), and
// one goroutine that reads the leader (quorum.Cluster.Leader)
// when the watch says it may have changed, and every lease/3 besides
// (a lease that runs out publishes nothing, and messages are lost while
// a master is away). What it reads it pushes to every observing session,
// unless it is what they were told last, or a stale read: a fence below
// the highest one pushed is never pushed (see leaderPush).
//
// The leader of a name held shared or as a semaphore is the holder with
// the lowest fence (quorum.LeaderOf). UNOBSERVE of a name the session does
// not observe is OK: it ends nothing, as a second OBSERVE starts nothing
// (but the state is read and pushed again after its OK). A session observes
// at most max_holds_per_session names.
//
// An OBSERVE is never answered from what was pushed last: that may name a
// term that ended before the OBSERVE arrived (a release whose push is on
// its way, a grant not read yet). Its session joins the observation as
// joining, with the number of reads begun so far; it is pushed the first
// read begun after that (one is begun at once), and from then on every
// change like the others. A read that lags behind what was pushed (a fence
// below the highest) serves no joining session: the next read, soon, does.

// observation is one name this agent's sessions observe. Its fields are
// guarded by Agent.mu, under which every push of it is queued, so a
// session's pushes of a name come in the order they were read, and none
// comes after the OK of its UNOBSERVE.
type observation struct {
	name     string
	sessions map[*session]struct{} // pushed every change
	// joining is the sessions whose OBSERVE is answered but not yet its
	// first push, each with the number of reads begun when it arrived: a
	// read begun later is pushed to it (see serves).
	joining map[*session]uint64
	reads   uint64        // reads begun
	poke    chan struct{} // a session joined: read now (one pending at most)
	stop    context.CancelFunc
	last    leaderState // what was pushed last, if known
	known   bool
	top     int64 // the highest fence pushed
}

// serves says whether the read numbered read (counting from 1) is what a
// session that joined when joined reads had begun may be pushed first: it
// began after the session's OBSERVE arrived, and does not lag behind what
// was pushed already (behind).
func serves(joined, read uint64, behind bool) bool { return read > joined && !behind }

// errBehind is a read that lags behind what was pushed while sessions wait
// for their first push: it is read again soon.
var errBehind = errors.New("agent: the leader read lags behind what was pushed")

// leaderState is a name's leader as read from the masters.
type leaderState struct {
	held         bool
	fence        int64
	value, agent string
}

func (l leaderState) line(name string) []byte {
	return protocol.Leader{Name: name, Held: l.held, Fence: l.fence, Value: l.value, Agent: l.agent}.Bytes()
}

// leaderPush decides whether read, a fresh read of a name's leader, is
// pushed to its observers, given what was pushed last (if known) and the
// highest fence pushed (top): a change is, a stale read (a fence below
// top) never is, so observers never see an older term after a newer one.
func leaderPush(known bool, last leaderState, top int64, read leaderState) bool {
	switch {
	case read.held && read.fence < top:
		return false
	case !known:
		return true
	}
	return read != last
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

// endObservations ends every observation of a closing session.
func (s *session) endObservations() {
	s.a.mu.Lock()
	defer s.a.mu.Unlock()
	for _, o := range s.observing {
		s.a.unobserveLocked(s, o)
	}
}

// unobserveLocked takes s off o; the last session to go ends o. Agent.mu
// is held.
func (a *Agent) unobserveLocked(s *session, o *observation) {
	delete(s.observing, o.name)
	delete(o.sessions, s)
	delete(o.joining, s)
	a.metrics.Observers.Dec()
	if len(o.sessions) == 0 && len(o.joining) == 0 {
		if n := a.names[o.name]; n != nil && n.observation == o {
			n.observation = nil
			a.tidyLocked(n)
		}
		o.stop()
	}
}

// observationLocked returns the agent's observation of name, started if
// there was none. Agent.mu is held.
func (a *Agent) observationLocked(name string) *observation {
	n := a.nameLocked(name)
	if o := n.observation; o != nil {
		return o
	}
	ctx, stop := context.WithCancel(a.runCtx)
	o := &observation{name: name, sessions: map[*session]struct{}{}, joining: map[*session]uint64{},
		poke: make(chan struct{}, 1), stop: stop}
	n.observation = o
	w := a.cluster.Watch(ctx, name)
	go a.observeLoop(ctx, o, w)
	return o
}

// observeLoop reads o's leader at once, then whenever w says it may have
// changed, a session joins, and every lease/3, until ctx ends. A read that failed, or found
// a holder's fence not settled yet (quorum.ErrUnsettled), is tried again
// after lock.retry_min (or lease/3, if sooner); once one holder has
// stayed unsettled for longer than a grant's round can take
// (10×master_timeout, or lease/3 if sooner), the fence a majority records
// will do (see quorum.Cluster.Leader, unsettledSince): a master that
// missed the grant's fence write-back keeps another fence until the hold
// ends.
//
// The name's mark on the masters is made before the first read, so that
// a grant after it is marked settled by its agent (which publishes), and is renewed beside the reads (keepMarked):
// a mark waits for every master, a paused one too (4×master_timeout), and
// a push must not wait behind it.
func (a *Agent) observeLoop(ctx context.Context, o *observation, w *quorum.Watch) {
	defer w.Close()
	every := a.cfg.Lock.Lease / 3
	settles := min(every, 10*a.cfg.Lock.MasterTimeout)
	a.cluster.MarkObserved(ctx, o.name, a.cfg.Lock.Lease)
	go a.keepMarked(ctx, o.name, every)
	var unsettled unsettledSince
	t := a.clock.NewTimer(every)
	defer t.Stop()
	for {
		lenient := unsettled.holder != "" && a.clock.Now().Sub(unsettled.since) >= settles
		err := a.readLeader(ctx, o, lenient)
		if unsettled = unsettled.after(err, a.clock.Now()); err != nil {
			t.Reset(min(every, a.cfg.Lock.RetryMin))
		}
		select {
		case <-ctx.Done():
			return
		case <-w.Leader():
		case <-o.poke:
		case <-t.C():
			t.Reset(every)
		}
	}
}

// unsettledSince is the holder that reads of a name found unsettled, and
// since when ("": they do not). Only a holder that stays unsettled is
// taken leniently: in a fast series of grants each new holder is briefly
// unsettled, and a clock that ran across them took the next one's
// unsettled fence at once.
type unsettledSince struct {
	holder string
	since  time.Time
}

// after is u after a read that ended with err at now: a read that failed
// says nothing of the holder.
func (u unsettledSince) after(err error, now time.Time) unsettledSince {
	var unsettled *quorum.UnsettledError
	switch {
	case err == nil:
		return unsettledSince{}
	case !errors.As(err, &unsettled) || unsettled.Holder == u.holder:
		return u
	}
	return unsettledSince{holder: unsettled.Holder, since: now}
}

// keepMarked renews name's mark on the masters (for a lease) every
// interval, well within the mark's lease, until ctx ends; then the mark
// is left to expire (another agent may observe the name too).
func (a *Agent) keepMarked(ctx context.Context, name string, interval time.Duration) {
	t := a.clock.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		a.cluster.MarkObserved(ctx, name, a.cfg.Lock.Lease)
		t.Reset(interval)
	}
}

// readLeader reads o's leader (see quorum.Cluster.Leader for lenient) and
// pushes it to o's sessions if it is news (see leaderPush), and to the
// joining sessions it serves. It pushes nothing if the read failed or
// found a fence not settled yet.
func (a *Agent) readLeader(ctx context.Context, o *observation, lenient bool) error {
	a.mu.Lock()
	o.reads++
	seq := o.reads
	a.mu.Unlock()
	h, held, err := a.cluster.Leader(ctx, o.name, lenient)
	if err != nil {
		return err
	}
	read := leaderState{}
	if held {
		read = leaderState{held: true, fence: h.Record.Fence, value: h.Record.Who.Value, agent: h.Record.Who.Agent}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if ctx.Err() != nil {
		return nil
	}
	line := read.line(o.name)
	if leaderPush(o.known, o.last, o.top, read) {
		o.last, o.known, o.top = read, true, max(o.top, read.fence)
		for s := range o.sessions {
			s.push(line)
		}
		a.metrics.LeaderPushes.Add(float64(len(o.sessions)))
	}
	behind := read.held && read.fence < o.top
	for s, joined := range o.joining {
		if serves(joined, seq, behind) {
			delete(o.joining, s)
			o.sessions[s] = struct{}{}
			s.push(line)
			a.metrics.LeaderPushes.Inc()
		}
	}
	if behind && len(o.joining) > 0 {
		return errBehind
	}
	return nil
}
