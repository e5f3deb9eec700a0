package locks

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/lock-agent/lock-agent/protocol"
	"github.com/lock-agent/lock-agent/quorum"
)

// What this agent hears on a name's channel (a quorum.Watch) and pushes
// to its clients: WANTED to the notify=wanted holds of a name that another
// request waits for, and LEADER to the sessions that observe a name.

// "Someone is waiting" (notify=wanted, coordination.md §3). A hold whose
// LOCK asked for it is pushed `* WANTED NAME owner=O waiting=N` when a
// request for NAME that conflicts with it starts waiting, on this agent or
// another, at most once per wantedEvery.
//
// Another agent's waiter says it waits on the name's channel when its
// first attempt finds the name held (quorum.Cluster.Wanted, with its mode
// and how many wait there), and again at each park; this agent hears it
// through a subscription to the name that it keeps while it has a
// notify=wanted hold of it (wantedName). A waiter of this agent is seen
// where it joins its queue, and again where its first attempt is refused.
// Both are hints: a message sent before the subscription was made, or
// while a master is unreachable, is lost, and the waiter says it again at
// its next park (within a lease). So that a hold granted while others wait
// already need not wait for that, its agent reads the waiting records
// when the subscription starts and each time a master confirms it
// (wantedOnRecords).
//
// N is the requests this agent knows to wait: its own waiters for the
// name, and the counts other agents said within the last lease.

// wantedEvery is the least time between two WANTED pushes to one hold.
const wantedEvery = 100 * time.Millisecond

// wantedLimit spaces the WANTED pushes of one hold. Its zero value allows
// the first. Guarded by the hold's session's mu.
type wantedLimit struct{ last time.Time }

// allow says whether a push may go out at now, and notes it if so.
func (l *wantedLimit) allow(now time.Time) bool {
	if !l.last.IsZero() && now.Sub(l.last) < wantedEvery {
		return false
	}
	l.last = now
	return true
}

// wantedName is a name this agent has notify=wanted holds of: the holds,
// and the subscription (its goroutine) through which it hears other
// agents' waiters. Guarded by manager.mu.
type wantedName struct {
	holds  []*Hold
	others map[string]heardWant // by agent instance
	stop   context.CancelFunc   // ends the subscription
}

// heardWant is what another agent last said of its waiters, and when.
type heardWant struct {
	quorum.Want
	at time.Time
}

// noteWantedLocked starts (live) or ends h's part in the WANTED pushes of
// its name, if its LOCK asked for them: the first such hold of a name
// starts the name's subscription, the last one ends it. manager.mu is held.
func (a *Manager) noteWantedLocked(h *Hold, live bool) {
	if !h.notifyWanted || a.runCtx == nil {
		return
	}
	name := h.rh.Name
	rec := a.names[name]
	if live && rec == nil {
		rec = a.nameLocked(name)
	}
	if rec == nil {
		return
	}
	n := rec.wanted
	switch {
	case live && n == nil:
		ctx, stop := context.WithCancel(a.runCtx)
		n = &wantedName{others: map[string]heardWant{}, stop: stop}
		rec.wanted = n
		go a.hearWanted(ctx, name, n)
		fallthrough
	case live:
		n.holds = append(n.holds, h)
	case n != nil:
		n.holds = slices.DeleteFunc(n.holds, func(o *Hold) bool { return o == h })
		if len(n.holds) == 0 {
			n.stop()
			rec.wanted = nil
			a.tidyLocked(rec)
		}
	}
}

// hearWanted is the subscription of name for n: each time another agent
// says that it waits, the holds that conflict with its waiter are told.
func (a *Manager) hearWanted(ctx context.Context, name string, n *wantedName) {
	w := a.cluster.Watch(ctx, name)
	defer w.Close()
	a.wantedOnRecords(ctx, name, n) // the channel may be subscribed already: then no master confirms it again
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.Recheck():
			a.wantedOnRecords(ctx, name, n)
			continue
		case <-w.Wanted():
		}
		wants := w.Wants()
		shared := true // a shared holder is wanted only by an exclusive waiter
		now := a.clock.Now()
		a.mu.Lock()
		for instance, want := range wants {
			n.others[instance] = heardWant{Want: want, at: now}
			shared = shared && want.Shared
		}
		a.mu.Unlock()
		if len(wants) > 0 {
			a.pushWanted(name, wanter{shared: shared})
		}
	}
}

// wantedOnRecords tells the notify=wanted holds of name that they are
// wanted if another agent records waiters for it (see waiters.go): those
// may have started waiting, and said so, before the subscription was made
// or a master confirmed it (which is when this runs), and would say it
// again only at their next park. A record does not say whether its waiters want the
// name shared, so only holds that every waiter conflicts with (exclusive
// ones, a semaphore's) are told.
func (a *Manager) wantedOnRecords(ctx context.Context, name string, n *wantedName) {
	ws, err := a.cluster.WaitingFor(ctx, name)
	if err != nil {
		return
	}
	self := a.cluster.WaitingKey(name).Holder
	now := a.clock.Now()
	heard := false
	a.mu.Lock()
	for _, w := range ws {
		if w.Instance != self {
			n.others[w.Instance] = heardWant{Want: quorum.Want{Count: w.Count}, at: now}
			heard = true
		}
	}
	a.mu.Unlock()
	if heard {
		a.pushWanted(name, wanter{shared: true}) // not to shared holds: see above
	}
}

// waiterWants tells the notify=wanted holds of w's name that w waits, if
// they conflict: w joined its queue (and may wait for them), or its
// attempt found the name held. A semaphore's waiter is told of where its
// attempt is refused only: until then, a free slot may be its.
func (a *Manager) waiterWants(w *Waiter, refused bool) {
	if !refused && limitOf(w.req) > 1 {
		return
	}
	a.mu.Lock()
	notify := a.wantedLocked(w.req.Names[0]) != nil
	a.mu.Unlock()
	if notify {
		a.pushWanted(w.req.Names[0], wanter{shared: w.req.Mode == protocol.Shared, limit: limitOf(w.req)})
	}
}

// saysWanted is a waiter's first attempt refused as BUSY: the agents that
// hold its name hear that it waits, once per wait, and this agent's
// notify=wanted holders of it are told (see waiterWants). Only the name's
// contender calls it.
func (a *Manager) saysWanted(q *queue, w *Waiter) {
	if w.saidWanted {
		return
	}
	w.saidWanted = true
	a.tellWanted(q, w) // first: the holder's agent is the one waiting for it
	a.waiterWants(w, true)
	a.startsWaiting(q)
}

// tellWanted tells the agents that hold q's name that w, its head, waits
// (quorum.Cluster.Wanted), what this agent's waiters for it want: not if w
// left the queue meanwhile (a CANCEL while its round was out), nor again
// within wantedEvery of the last time for w (its first BUSY and the park
// after it would say it twice, and the second, late on a busy host, would
// reach a holder as a second WANTED). Only q's contender calls it.
func (a *Manager) tellWanted(q *queue, w *Waiter) {
	now := a.clock.Now()
	if !w.toldWanted.IsZero() && now.Sub(w.toldWanted) < wantedEvery {
		return
	}
	q.mu.Lock()
	want, waits := quorum.Want{Shared: w.req.Mode == protocol.Shared, Count: len(q.waiters)}, w.state == queued
	q.mu.Unlock()
	if !waits {
		return
	}
	w.toldWanted = now
	a.cluster.Wanted(q.name, want)
}

// wanter is what is known of the waiter that wants a name: its mode, and
// its limit (0 for another agent's: its attempt was refused BUSY, so its
// limit is the holders').
type wanter struct {
	shared bool
	limit  int
}

// waitsFor says whether the waiter waits for h: not a shared waiter for a
// shared holder, nor one whose limit differs (it is answered CONFLICT).
// h's session's mu is held.
func (wr wanter) waitsFor(h *Hold) bool {
	return !(wr.shared && h.mode == protocol.Shared) && (wr.limit == 0 || wr.limit == h.limit)
}

// pushWanted pushes WANTED to each notify=wanted hold of name that the
// waiter waits for, but to those pushed less than wantedEvery ago.
func (a *Manager) pushWanted(name string, wr wanter) {
	now := a.clock.Now()
	a.mu.Lock()
	n := a.wantedLocked(name)
	if n == nil {
		a.mu.Unlock()
		return
	}
	holds := slices.Clone(n.holds)
	waiting := a.waitingKnownLocked(name, n, now)
	a.mu.Unlock()
	for _, h := range holds {
		line := protocol.Wanted{Name: name, Owner: h.owner, Waiting: waiting}.Bytes()
		h.sess.PushFor(h, func() bool {
			if !wr.waitsFor(h) || !h.wanted.allow(now) {
				return false
			}
			a.metrics.WantedPushes.Inc() // counted before the client can hear of it, as a LOST is
			return true
		}, line)
	}
}

// waitingKnownLocked is how many requests this agent knows to wait for
// name: its own waiters, and what other agents said within a lease (it
// forgets the older ones); at least 1. manager.mu is held.
func (a *Manager) waitingKnownLocked(name string, n *wantedName, now time.Time) int {
	waiting := 0
	if q := a.queueLocked(name); q != nil {
		q.mu.Lock()
		waiting = len(q.waiters)
		q.mu.Unlock()
	}
	for instance, h := range n.others {
		if now.Sub(h.at) > a.cfg.Lease {
			delete(n.others, instance)
			continue
		}
		waiting += h.Count
	}
	return max(waiting, 1)
}

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
// the highest one pushed, or a term after its end was pushed, is never
// pushed (see leaderPush).
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
// below the highest, or the term whose end was pushed last) serves no
// joining session: the next read, soon, does.

// observation is one name this agent's sessions observe. Its fields are
// guarded by manager.mu, under which every push of it is queued, so a
// session's pushes of a name come in the order they were read, and none
// comes after the OK of its UNOBSERVE.
type observation struct {
	name     string
	sessions map[Client]struct{} // pushed every change
	// joining is the sessions whose OBSERVE is answered but not yet its
	// first push, each with the number of reads begun when it arrived: a
	// read begun later is pushed to it (see serves).
	joining map[Client]uint64
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
// highest fence pushed (top): a change is, a stale read never is, so
// observers never see an older term after a newer one, nor a term again
// after its end.
func leaderPush(known bool, last leaderState, top int64, read leaderState) bool {
	switch {
	case stale(known, last, top, read):
		return false
	case !known:
		return true
	}
	return read != last
}

// stale says whether read, a held read of a name's leader, lags behind
// what its observers were pushed (see leaderPush): its fence is below the
// highest pushed (top), or it is the term whose end was pushed last
// ("none" after it). A term once ended does not come back to its
// observers (observer-order in internal/history), though a majority's
// read may show it again: the masters apply a grant and its release each
// in its own time, so a read may hear none from two masters, one that has
// applied the release and one that has not applied the grant yet, and the
// next read hear the term from that one, the grant applied now, and from
// the third, the release not yet applied there (seen in an election beside
// a loaded suite: …083, none, …083, …084); or it may find the masters
// between two writes of one change (a cached record's mark taken off
// before its new holder's fence is written). The next read, soon, shows
// what came after.
func stale(known bool, last leaderState, top int64, read leaderState) bool {
	return read.held && (read.fence < top || known && !last.held && read.fence == top)
}

// Observe has c observe name (OBSERVE; see the top of this part): c
// joins its observation, which is started if there was none, and is
// pushed the first read begun after this, unless c observes limit names
// already. ok, OBSERVE's reply, is queued here, before any push of the
// name.
func (a *Manager) Observe(c Client, name string, limit int, ok []byte) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	names := a.observing[c]
	o := names[name]
	if o == nil {
		if len(names) >= limit {
			return protocol.Errorf(protocol.ErrLimit, "session observes %d names (max_holds_per_session)", limit)
		}
		o = a.observationLocked(name)
		o.sessions[c] = struct{}{}
		if names == nil {
			names = map[string]*observation{}
			a.observing[c] = names
		}
		names[name] = o
		a.metrics.Observers.Inc()
	}
	delete(o.sessions, c)
	o.joining[c] = o.reads
	c.Reply(ok)
	select {
	case o.poke <- struct{}{}:
	default:
	}
	return nil
}

// Unobserve takes c off name's observation (UNOBSERVE), if it observes it.
func (a *Manager) Unobserve(c Client, name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if o := a.observing[c][name]; o != nil {
		a.unobserveLocked(c, o)
	}
}

// UnobserveAll ends every observation of c, a closing session.
func (a *Manager) UnobserveAll(c Client) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, o := range a.observing[c] {
		a.unobserveLocked(c, o)
	}
}

// unobserveLocked takes c off o; the last session to go ends o.
// manager.mu is held.
func (a *Manager) unobserveLocked(c Client, o *observation) {
	if names := a.observing[c]; names != nil {
		delete(names, o.name)
		if len(names) == 0 {
			delete(a.observing, c)
		}
	}
	delete(o.sessions, c)
	delete(o.joining, c)
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
// there was none. manager.mu is held.
func (a *Manager) observationLocked(name string) *observation {
	n := a.nameLocked(name)
	if o := n.observation; o != nil {
		return o
	}
	ctx, stop := context.WithCancel(a.runCtx)
	o := &observation{name: name, sessions: map[Client]struct{}{}, joining: map[Client]uint64{},
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
func (a *Manager) observeLoop(ctx context.Context, o *observation, w *quorum.Watch) {
	defer w.Close()
	every := a.cfg.Lease / 3
	settles := min(every, 10*a.cfg.MasterTimeout)
	a.cluster.MarkObserved(ctx, o.name, a.cfg.Lease)
	go a.keepMarked(ctx, o.name, every)
	var unsettled unsettledSince
	t := a.clock.NewTimer(every)
	defer t.Stop()
	for {
		lenient := unsettled.holder != "" && a.clock.Now().Sub(unsettled.since) >= settles
		err := a.readLeader(ctx, o, lenient)
		if unsettled = unsettled.after(err, a.clock.Now()); err != nil {
			t.Reset(min(every, a.cfg.RetryMin))
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
func (a *Manager) keepMarked(ctx context.Context, name string, interval time.Duration) {
	t := a.clock.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		a.cluster.MarkObserved(ctx, name, a.cfg.Lease)
		t.Reset(interval)
	}
}

// readLeader reads o's leader (see quorum.Cluster.Leader for lenient) and
// pushes it to o's sessions if it is news (see leaderPush), and to the
// joining sessions it serves. It pushes nothing if the read failed or
// found a fence not settled yet.
func (a *Manager) readLeader(ctx context.Context, o *observation, lenient bool) error {
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
	behind := stale(o.known, o.last, o.top, read)
	if leaderPush(o.known, o.last, o.top, read) {
		o.last, o.known, o.top = read, true, max(o.top, read.fence)
		for c := range o.sessions {
			c.Push(line)
		}
		a.metrics.LeaderPushes.Add(float64(len(o.sessions)))
	}
	for c, joined := range o.joining {
		if serves(joined, seq, behind) {
			delete(o.joining, c)
			o.sessions[c] = struct{}{}
			c.Push(line)
			a.metrics.LeaderPushes.Inc()
		}
	}
	if behind && len(o.joining) > 0 {
		return errBehind
	}
	return nil
}
