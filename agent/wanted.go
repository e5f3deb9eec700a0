package agent

import (
	"context"
	"slices"
	"time"

	"github.com/lock-agent/lock-agent/protocol"
	"github.com/lock-agent/lock-agent/quorum"
)

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
// agents' waiters. Guarded by Agent.mu.
type wantedName struct {
	holds  []*hold
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
// starts the name's subscription, the last one ends it. Agent.mu is held.
func (a *Agent) noteWantedLocked(h *hold, live bool) {
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
		n.holds = slices.DeleteFunc(n.holds, func(o *hold) bool { return o == h })
		if len(n.holds) == 0 {
			n.stop()
			rec.wanted = nil
			a.tidyLocked(rec)
		}
	}
}

// hearWanted is the subscription of name for n: each time another agent
// says that it waits, the holds that conflict with its waiter are told.
func (a *Agent) hearWanted(ctx context.Context, name string, n *wantedName) {
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
// wanted if another agent records waiters for it (see waiting.go): those
// may have started waiting, and said so, before the subscription was made
// or a master confirmed it (which is when this runs), and would say it
// again only at their next park. A record does not say whether its waiters want the
// name shared, so only holds that every waiter conflicts with (exclusive
// ones, a semaphore's) are told.
func (a *Agent) wantedOnRecords(ctx context.Context, name string, n *wantedName) {
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
func (a *Agent) waiterWants(w *waiter, refused bool) {
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
func (a *Agent) saysWanted(q *queue, w *waiter) {
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
func (a *Agent) tellWanted(q *queue, w *waiter) {
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
func (wr wanter) waitsFor(h *hold) bool {
	return !(wr.shared && h.mode == protocol.Shared) && (wr.limit == 0 || wr.limit == h.limit)
}

// pushWanted pushes WANTED to each notify=wanted hold of name that the
// waiter waits for, but to those pushed less than wantedEvery ago.
func (a *Agent) pushWanted(name string, wr wanter) {
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
		s := h.sess
		s.mu.Lock()
		if s.holds[h.key()] == h && wr.waitsFor(h) && h.wanted.allow(now) {
			a.metrics.WantedPushes.Inc()
			s.push(protocol.Wanted{Name: name, Owner: h.owner, Waiting: waiting}.Bytes())
		}
		s.mu.Unlock()
	}
}

// waitingKnownLocked is how many requests this agent knows to wait for
// name: its own waiters, and what other agents said within a lease (it
// forgets the older ones); at least 1. Agent.mu is held.
func (a *Agent) waitingKnownLocked(name string, n *wantedName, now time.Time) int {
	waiting := 0
	if q := a.queueLocked(name); q != nil {
		q.mu.Lock()
		waiting = len(q.waiters)
		q.mu.Unlock()
	}
	for instance, h := range n.others {
		if now.Sub(h.at) > a.cfg.Lock.Lease {
			delete(n.others, instance)
			continue
		}
		waiting += h.Count
	}
	return max(waiting, 1)
}
