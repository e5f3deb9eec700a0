package agent

import (
	"sync/atomic"
	"time"

	"github.com/lock-agent/lock-agent/quorum/rules"

	"github.com/lock-agent/lock-agent/protocol"
	"github.com/lock-agent/lock-agent/renewal"
)

// WHO lists who waits (coordination.md §5): while requests for a name wait
// on this agent, it records on the masters how many and since when
// (quorum.Cluster.SetWaiting), so that WHO on any agent shows them.
//
// A queue's requests count as waiting once an attempt for one of them
// found the name held (contended; see startsWaiting): a LOCK granted at
// once is never recorded, and costs no write. From then on, the record is
// rewritten when the count changes, coalesced: one goroutine per name
// (recordWaiting) writes the latest count when the last write is done, at
// most once per waitingEvery, so a burst of waiters costs a few writes, not
// one each, and writes never pass each other. The watchdog renews the record in its batch, and the
// goroutine removes it when the last waiter leaves; a dead agent's record
// lapses within its lease.

// waitRecord is this agent's waiting record of one name: its goroutine's
// wake-up, and the renewal the watchdog lost, if it did.
type waitRecord struct {
	name string
	kick chan struct{} // coalesced: the count may have changed
	lost atomic.Pointer[renewal.Hold]
}

// waitCount is what a record says: the count and since (Unix ms).
type waitCount struct {
	count int
	since int64
}

// startsWaiting marks q's requests as waiting (an attempt of its head
// found the name held) and has them recorded. Only q's contender calls it;
// no lock is held.
func (a *Agent) startsWaiting(q *queue) {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := a.names[q.name] // q's: not retired while its contender runs
	if n == nil {
		return
	}
	rec := n.waitRec
	if rec == nil {
		if a.runCtx == nil || a.runCtx.Err() != nil {
			return
		}
		rec = &waitRecord{name: q.name, kick: make(chan struct{}, 1)}
		n.waitRec = rec
		go a.recordWaiting(rec)
	}
	q.mu.Lock()
	q.contended, q.rec = true, rec
	q.mu.Unlock()
	signal(rec.kick)
}

// waitingNowLocked is what name's record should say. Agent.mu is held.
func (a *Agent) waitingNowLocked(name string) waitCount {
	q := a.queueLocked(name)
	if q == nil {
		return waitCount{}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.contended || len(q.waiters) == 0 {
		return waitCount{}
	}
	return waitCount{count: len(q.waiters), since: q.waiters[0].joined.UnixMilli()}
}

// recordWaiting keeps rec's record on the masters in step with the count,
// until no request for its name waits.
func (a *Agent) recordWaiting(rec *waitRecord) {
	var written waitCount
	var rh *renewal.Hold // the record's renewal, while it is written
	for {
		a.mu.Lock()
		want := a.waitingNowLocked(rec.name)
		if want.count == 0 && written.count == 0 {
			if n := a.names[rec.name]; n != nil && n.waitRec == rec {
				n.waitRec = nil
				a.tidyLocked(n)
			}
			a.mu.Unlock()
			return
		}
		a.mu.Unlock()
		if lost := rec.lost.Swap(nil); lost != nil && lost == rh {
			written, rh = waitCount{}, nil // write it anew
		}
		if want != written {
			rh = a.writeWaiting(rec, want, rh)
			written = want
			a.spaceWaiting()
			continue // the count may have changed meanwhile
		}
		select {
		case <-rec.kick:
		case <-a.runCtx.Done():
			return // the record lapses within a lease
		}
	}
}

// waitingEvery spaces the writes of one name's record, so that a name
// whose waiters come and go fast (a run of local holders, say) costs the
// masters at most one small script per interval: 20 a second per name
// with churning waiters, while WHO is at most that much behind.
const waitingEvery = 50 * time.Millisecond

// spaceWaiting waits waitingEvery (not lease logic: a pace, on the real
// clock), or until the agent stops.
func (a *Agent) spaceWaiting() {
	t := time.NewTimer(waitingEvery)
	defer t.Stop()
	select {
	case <-t.C:
	case <-a.runCtx.Done():
	}
}

// writeWaiting writes want as rec's record and returns its renewal: rh,
// or a new one for a new record, or nil once it is removed.
func (a *Agent) writeWaiting(rec *waitRecord, want waitCount, rh *renewal.Hold) *renewal.Hold {
	lease := a.cfg.Lock.Lease
	start := a.clock.Now()
	a.cluster.SetWaiting(a.runCtx, rec.name, want.count, want.since, lease)
	switch {
	case want.count == 0 && rh != nil:
		a.watchdog.Remove(rh)
		return nil
	case want.count > 0 && rh == nil:
		// A write that missed the masters is found gone by the renewal,
		// and written anew (see waitingLost).
		key := a.cluster.WaitingKey(rec.name)
		rh = &renewal.Hold{Name: rec.name, Holder: key.Holder, Kind: renewal.KindWaiting, Lease: lease, Owner: rec}
		a.watchdog.Add(rh, start.Add(rules.Validity(lease, 0, a.cfg.Lock.DriftFactor)))
	}
	return rh
}

// waitingLost is the watchdog's report that rh, a waiting record's
// renewal, failed: the masters may have dropped it; it is written anew.
func (a *Agent) waitingLost(rh *renewal.Hold) {
	if rec, _ := rh.Owner.(*waitRecord); rec != nil {
		rec.lost.Store(rh)
		signal(rec.kick)
	}
}

// kickWaitingLocked tells q's record, if it has one, that its count may
// have changed. q.mu is held.
func (q *queue) kickWaitingLocked() {
	if q.rec != nil {
		signal(q.rec.kick)
	}
}

// signal sends on a coalescing channel without waiting.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// whoWaiting sends WHO's line of each agent's waiting record of name and
// returns how many requests they count, or false if no majority answered.
func (s *session) whoWaiting(tag, name string) (int, bool) {
	ws, err := s.a.cluster.WaitingFor(s.ctx, name)
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
