package agent

import (
	"context"
	"strconv"

	"github.com/lock-agent/lock-agent/quorum/rules"

	"github.com/lock-agent/lock-agent/protocol"
	"github.com/lock-agent/lock-agent/quorum"
	"github.com/lock-agent/lock-agent/renewal"
)

// A waiter may have a place in its name's queue in the masters (an entry:
// see quorum.Entry), shared by every agent: a fair=true LOCK that has to
// wait, and an exclusive one that only readers keep out (so that readers
// arriving after it cannot starve it). The contender makes the entries, in
// one round for all the waiters that want one, and renews them in the
// watchdog's batch (their heartbeat); whoever takes a waiter out of the
// queue removes its entry.
//
// The waiters of a queue that have entries are always its first ones, in
// ticket order: a waiter that wants an entry gets one together with every
// waiter ahead of it that has none, in one call. Otherwise a head without
// an entry (which may pass no entry) could wait forever for a waiter behind
// it that has one (which only the head's turn would try).

// entriesWanted says whether a waiter of q waits for an entry.
func (q *queue) entriesWanted() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.wantEntries
}

// enter gives the waiters of q that want an entry (and every one ahead of
// them that has none) their places in the masters' queue, and starts
// their heartbeats. A failed round is tried again after a back-off; the
// waiters go on waiting meanwhile.
func (a *Agent) enter(ctx context.Context, q *queue) {
	if !q.entriesWanted() || a.clock.Now().Before(q.enterAfter) {
		return
	}
	q.mu.Lock()
	last := -1
	for i, w := range q.waiters {
		if w.wantsEntry && w.entry == nil {
			last = i
		}
	}
	var ws []*waiter
	var es []quorum.Entry
	for _, w := range q.waiters[:last+1] {
		if w.entry == nil && w.req.Wait != 0 {
			w.wantsEntry = true
			if w.asked == nil {
				w.asked = &quorum.Entry{ID: a.entryID(), Claim: claimOf(w.req)}
			}
			ws = append(ws, w)
			es = append(es, *w.asked)
		}
	}
	q.wantEntries = false
	q.mu.Unlock()
	if len(ws) == 0 {
		return
	}
	lease := a.cfg.Lock.Lease
	start := a.clock.Now()
	tickets, err := a.cluster.Enqueue(ctx, q.name, es, lease)
	if err != nil {
		// The entries may stand on some masters (a minority answered, or
		// a master answers after the round gave up on it). The retry asks
		// for the same ones, so those keep their places; a waiter that
		// leaves first takes its own out (see leave): left there, it
		// would hold up every LOCK of the name for a heartbeat.
		q.enterFails++
		q.enterAfter = a.clock.Now().Add(a.backoff(q.enterFails))
		q.mu.Lock()
		q.wantEntries = true
		q.mu.Unlock()
		a.log.Debug("queue entries not made; trying again", "name", q.name, "error", err)
		return
	}
	q.enterFails = 0
	deadline := start.Add(rules.Validity(lease, 0, a.cfg.Lock.DriftFactor))
	var gone []quorum.Entry
	q.mu.Lock()
	for i, w := range ws {
		w.asked = nil
		if tickets[i] == 0 || w.state != queued {
			gone = append(gone, es[i])
			continue
		}
		w.entry = &es[i]
		w.entryHold = &renewal.Hold{Name: q.name, Holder: es[i].Member(), Kind: renewal.KindEntry, Lease: lease, Owner: w}
		// Under q.mu, so that leave cannot remove it before it is added.
		a.watchdog.Add(w.entryHold, deadline)
	}
	q.mu.Unlock()
	a.dequeue(q.name, gone)
}

// leave removes the entry of w, which was just taken out of its queue.
func (a *Agent) leave(w *waiter) {
	q := w.q
	q.mu.Lock()
	e, rh := w.entry, w.entryHold
	if e == nil {
		e = w.asked // its round failed: it may stand on some masters
	}
	w.entry, w.entryHold, w.asked = nil, nil, nil
	q.mu.Unlock()
	if e == nil {
		return
	}
	if rh != nil {
		a.watchdog.Remove(rh)
	}
	a.dequeue(q.name, []quorum.Entry{*e})
}

// entryLost is the watchdog's report that the heartbeat of rh's entry
// failed: the masters may have dropped it. Every entry of its queue is
// made anew, in the local order, so the entries stay the first waiters
// (see the top of this file). rh's Owner is its waiter, set before the
// watchdog had it and not changed after; the waiter's entryHold says
// whether rh is still its entry (leave, or an earlier loss, took it).
func (a *Agent) entryLost(rh *renewal.Hold) {
	w, _ := rh.Owner.(*waiter)
	if w == nil {
		return
	}
	q := w.q
	var gone []quorum.Entry
	var beats []*renewal.Hold
	q.mu.Lock()
	if w.entryHold != rh {
		q.mu.Unlock()
		return
	}
	for _, o := range q.waiters {
		if o.entry == nil {
			continue
		}
		gone = append(gone, *o.entry)
		if o.entryHold != rh {
			beats = append(beats, o.entryHold)
		}
		o.entry, o.entryHold = nil, nil
		q.wantEntries = true
	}
	q.mu.Unlock()
	for _, b := range beats {
		a.watchdog.Remove(b)
	}
	a.log.Warn("queue entry lost; waiters queue again", "name", q.name, "waiters", len(gone))
	a.dequeue(q.name, gone)
	q.poke()
}

// dequeue removes entries of name in the background.
func (a *Agent) dequeue(name string, entries []quorum.Entry) {
	if len(entries) > 0 {
		go a.cluster.Dequeue(context.Background(), name, entries)
	}
}

// entryID is a fresh entry id, unique across every agent anywhere.
func (a *Agent) entryID() string {
	return a.cfg.AgentID + "/" + a.instance + "/q" + strconv.FormatUint(a.attempts.Add(1), 10)
}

// claimOf is the claim a LOCK asks for.
func claimOf(l protocol.Lock) quorum.Claim {
	return quorum.Claim{Mode: quorum.Mode(l.Mode), Limit: limitOf(l)}
}
