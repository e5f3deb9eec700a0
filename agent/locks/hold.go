package locks

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/lock-agent/lock-agent/protocol"
	"github.com/lock-agent/lock-agent/quorum"
	"github.com/lock-agent/lock-agent/renewal"
)

// A hold's life in the agent: its grant (install), its loss (the
// watchdog's word, or an operator's REVOKE), its end (an UNLOCK undone,
// a release or a hand-over in the masters, the tail it may leave) and its
// value.

// Hold is one name held by one session+owner. Its session's holds map is
// its one record in the agent; the watchdog watches its rh, whose Owner is
// the hold while it is live (guarded by manager.mu: see holderOf). acquired,
// mode and the session's map are guarded by the session's mu.
type Hold struct {
	// rh is the name, holder id, and, for a ttl= hold, its end. The holds
	// a record is lent to share it (see lend.go); its Owner is the current
	// one.
	rh    *renewal.Hold
	sess  Client
	owner string
	fence int64
	// acquired is the mode of each acquisition, the most recent last (its
	// length is the count): UNLOCK undoes them last first.
	acquired []protocol.Mode
	mode     protocol.Mode // as the masters hold it: exclusive while any acquisition is
	limit    int           // 1 for a lock, K for a semaphore
	slot     int           // a semaphore's slot
	// granted is when it was granted, for lock_agent_hold_seconds.
	granted time.Time
	// gaugeMode is the mode the holds gauge counts it under; guarded by
	// manager.mu (mode changes under the session's).
	gaugeMode protocol.Mode
	// lent is the lending this hold is part of (see lend.go), or nil: the
	// cache or the run that lent it its record, or the run its own record
	// started when a local waiter came after its grant (see lateRun), or
	// took over from its cache. Set under manager.mu, when the hold is made
	// or becomes a run's first holder.
	lent *lending
	// notifyWanted says its LOCK asked for WANTED pushes (notify=wanted;
	// see watch.go), set when the hold is made; wanted spaces them,
	// guarded by the session's mu.
	notifyWanted bool
	wanted       wantedLimit
	// cacheable says its record may be cached when it ends: its LOCK was of
	// a kind that caches, and no EXTEND or downgrade changed it since, nor
	// a run took its cache over; guarded by manager.mu.
	cacheable bool
	// cohortable says its LOCK may be part of a run (see lendable);
	// reserving that a run's block is being reserved for it (see
	// lateRun), lateFailed that one failed or it changed since (EXTEND,
	// a downgrade). Guarded by manager.mu.
	cohortable, reserving, lateFailed bool
	// releasing says it was lost and its record is yet to be released in
	// the masters: its name's lostRelease counts it. Guarded by
	// manager.mu.
	releasing bool
}

// HoldKey identifies a hold within a session.
type HoldKey struct {
	Name, Owner string
}

// Count is how many acquisitions of h are not undone yet. The session's
// mu is held.
func (h *Hold) Count() int { return len(h.acquired) }

// holderOf is the hold whose record rh is: nil once it was lost or its
// holder forgot it. manager.mu is held.
func holderOf(rh *renewal.Hold) *Hold {
	h, _ := rh.Owner.(*Hold)
	return h
}

// startHoldLocked makes h the live holder of its record: the one a loss
// reaches. With endHoldLocked, it alone keeps manager.held and the holds
// gauge. manager.mu is held.
func (a *Manager) startHoldLocked(h *Hold) {
	h.rh.Owner = h
	if h.limit == 1 && h.mode == protocol.Exclusive {
		a.nameLocked(h.rh.Name).locked = h
	}
	a.held++
	a.metrics.holdStarted(h)
	a.noteWantedLocked(h, true)
}

// endHoldLocked ends h, the live holder of its record: it was lost, let
// go, or passed on. manager.mu is held.
func (a *Manager) endHoldLocked(h *Hold) {
	h.rh.Owner = nil
	if n := a.names[h.rh.Name]; n != nil && n.locked == h {
		n.locked = nil
		a.tidyLocked(n)
	}
	a.held--
	a.metrics.holdEnded(h)
	a.noteWantedLocked(h, false)
}

// limitOf is a LOCK's limit: 1 for a plain lock.
func limitOf(l protocol.Lock) int { return max(l.Limit, 1) }

// Reenter counts another acquisition of h by its session+owner, or says why
// it contradicts the hold: another limit, or shared to exclusive (an
// upgrade would deadlock two readers that both try it). The session's mu
// is held.
func (h *Hold) Reenter(l protocol.Lock) error {
	switch {
	case limitOf(l) != h.limit:
		return protocol.Errorf(protocol.ErrConflict, "%s is held with limit=%d", h.rh.Name, h.limit)
	case h.mode == protocol.Shared && l.Mode == protocol.Exclusive:
		return protocol.Errorf(protocol.ErrConflict, "no upgrade: %s is held shared", h.rh.Name)
	}
	h.acquired = append(h.acquired, l.Mode)
	return nil
}

// Snapshot is what a grant or re-entry answers, taken under the
// session's mu.
func (h *Hold) Snapshot(validity time.Duration) Result {
	return Result{Fence: h.fence, Count: h.Count(), Validity: validity, Limit: h.limit, Slot: h.slot}
}

func (h *Hold) Key() HoldKey { return HoldKey{h.rh.Name, h.owner} }

// Name is the name h holds.
func (h *Hold) Name() string { return h.rh.Name }

// Holds says whether h's record is holder's.
func (h *Hold) Holds(holder string) bool { return h.rh.Holder == holder }

// Undoable says whether an UNLOCK of mode may undo an acquisition of h:
// any may, but an exclusive one needs an exclusive acquisition left. The
// session's mu is held.
func (h *Hold) Undoable(mode protocol.Mode) bool {
	return mode != protocol.Exclusive || slices.Contains(h.acquired, protocol.Exclusive)
}

// Undo undoes the most recent acquisition of h (the most recent exclusive
// one, for mode exclusive), which the caller checked exists (undoable),
// and returns the count left, and whether h became shared: only shared
// acquisitions are left of an exclusive hold. It is shared here at once, so
// that a following exclusive LOCK is an upgrade; in the masters by a
// downgrade round. The session's mu is held.
func (h *Hold) Undo(mode protocol.Mode) (count int, downgraded bool) {
	undo := len(h.acquired) - 1
	if mode == protocol.Exclusive {
		for undo >= 0 && h.acquired[undo] != protocol.Exclusive {
			undo--
		}
	}
	h.acquired = append(h.acquired[:undo], h.acquired[undo+1:]...)
	if h.Count() > 0 && h.mode == protocol.Exclusive && !slices.Contains(h.acquired, protocol.Exclusive) {
		h.mode = protocol.Shared
		return h.Count(), true
	}
	return h.Count(), false
}

// InfoLine is HOLDS' line of h, with its validity. The session's mu is held.
func (h *Hold) InfoLine(tag string, validity time.Duration) []byte {
	return protocol.HoldInfo{Tag: tag, Name: h.rh.Name, Owner: h.owner, Fence: h.fence,
		Count: h.Count(), Mode: string(h.mode), Validity: validity, Limit: h.limit, Slot: h.slot}.Bytes()
}

// LostLine is the LOST push of h: the loss's reason, and the operator's
// word of a revocation, if any, as why= (see renewal.Revocation).
func LostLine(h *Hold, loss renewal.Loss) []byte {
	return protocol.Lost{Name: h.rh.Name, Owner: h.owner, Fence: h.fence, Reason: string(loss.Reason), Why: loss.Why}.Bytes()
}

// Client is what the lock manager sees of a session: the one whose LOCK
// waits (waiter.sess) or whose hold it is (hold.sess). Each method takes
// the session's mu itself, if it needs it, so the manager calls them with
// none of its locks held, but where it says otherwise.
type Client interface {
	// SessionID is the session's number, for holder ids.
	SessionID() uint64
	// Install makes the grant of w's name, won in the masters as holder,
	// a hold of the session (see Manager.StartHold), and returns its
	// snapshot.
	Install(w *Waiter, holder string, g quorum.Grant) (Result, error)
	// Reenter counts w as a re-entry of the session+owner's hold of its
	// name, if it has one and claim (run under the session's mu) takes w
	// out of its queue for it, and returns its answer (see
	// manager.reenterQueued).
	Reenter(w *Waiter, claim func(h *Hold) (time.Duration, bool)) (Result, bool)
	// Adopt makes the hold that take returns (a record passed on in the
	// agent: see passTo) the hold of w's session+owner, if the session is
	// not closing and has none of the name; take runs under the session's
	// mu and returns nil to refuse.
	Adopt(w *Waiter, take func() *Hold)
	// LockEnded answers w's LOCK of one name with r.
	LockEnded(w *Waiter, r Result)
	// TellLost takes the lost h out of the session's holds and queues its
	// LOST, if h is still one of them, and returns that line's number in
	// the session's outbox (0 if it was not).
	TellLost(h *Hold, loss renewal.Loss) (told uint64)
	// AwaitWritten returns once the session's line told went to its
	// socket, or until fires.
	AwaitWritten(told uint64, until <-chan time.Time)
	// PushFor queues line for the client if h is still one of the
	// session's holds and ok says so: ok runs under the session's mu, only
	// while h is one of them, and line is queued right after it returns
	// true (so what ok counts is counted before the client can hear it).
	PushFor(h *Hold, ok func() bool, line []byte) bool
	// Push and Reply queue line for the client (see outbox.Push and
	// Reply); neither waits, so they may be called under manager.mu.
	Push(line []byte)
	Reply(line []byte)
	// FindHold is the session's hold whose record's holder id is holder, or
	// nil.
	FindHold(holder string) *Hold
	Logger() hclog.Logger
}

// StartHold makes a hold of c for w's grant, won in the masters as holder,
// its record's live holder, and has the watchdog renew it: its snapshot.
// A ttl= hold is a watchdog hold with an end, ttl from now: its validity
// is the grant's, or the time to its end if sooner. c's mu is held.
func (a *Manager) StartHold(c Client, w *Waiter, holder string, g quorum.Grant) (*Hold, Result) {
	h := &Hold{rh: &renewal.Hold{Name: w.req.Names[0], Holder: holder, Record: g.Record, Tail: tailOf(w.req).Any()}, sess: c, owner: w.req.Owner,
		fence: g.Fence, acquired: []protocol.Mode{w.req.Mode}, mode: w.req.Mode, limit: limitOf(w.req), slot: g.Slot, granted: time.Now(), gaugeMode: w.req.Mode,
		notifyWanted: w.req.NotifyWanted, cacheable: lendable(w.req, lendLinger) && w.done == nil && w.reused, // not a multi-lock's; its name used again
		cohortable: lendable(w.req, lendRun)}
	if w.req.TTL > 0 {
		h.rh.End = a.clock.Now().Add(w.req.TTL)
	}
	a.mu.Lock()
	a.startHoldLocked(h)
	a.startCohortLocked(h, w.req, g)
	a.mu.Unlock()
	a.watchdog.Add(h.rh, g.Deadline)
	return h, h.Snapshot(a.watchdog.Deadline(h.rh).Sub(a.clock.Now()))
}

// OnLost is the watchdog's report of a hold (or a waiter's queue entry,
// or the agent's waiting record) that ended on its own.
func (a *Manager) OnLost(rh *renewal.Hold, loss renewal.Loss) {
	switch rh.Kind {
	case renewal.KindEntry:
		a.entryLost(rh)
	case renewal.KindWaiting:
		a.waitingLost(rh)
	default:
		a.lose(rh, loss)
	}
}

// lose tells a lost hold's client LOST with its loss, then ends the hold
// in the masters: at once if it was revoked (a majority can no longer
// renew it), else once its validity ended. The watchdog no longer watches
// rh.
func (a *Manager) lose(rh *renewal.Hold, loss renewal.Loss) {
	h := a.detachLost(rh)
	if h == nil {
		a.cacheLost(rh, loss)
		return
	}
	if told := h.sess.TellLost(h, loss); told != 0 {
		a.AfterLost(h, loss, told)
	}
}

// detachLost makes rh's holder, if it has one, no longer its record's
// holder, and returns it. manager.mu is not held.
func (a *Manager) detachLost(rh *renewal.Hold) *Hold {
	a.mu.Lock()
	defer a.mu.Unlock()
	h := holderOf(rh)
	if h != nil {
		a.endLostLocked(h)
	}
	return h
}

// endLostLocked ends the lost h as its record's holder, its run and its
// cache, and counts its record as one to release (see
// releasingLostLocked): before its client is told LOST, which the client
// may answer at once with a LOCK of the name. manager.mu is held.
func (a *Manager) endLostLocked(h *Hold) {
	a.endHoldLocked(h)
	a.endCohortLocked(h)
	a.dropCacheLocked(h)
	a.releasingLostLocked(h)
}

// A lost hold's release. A hold that ran out (ttl=) or whose renewals
// failed is told LOST and then released in the masters in the background
// (releaseAt), or by its session if the session let go of it meanwhile
// (an UNLOCK, its close). Until that release is answered the masters still
// show the agent's own record, and a LOCK of the name (the client's answer
// to the LOST, as Redisson's users write it) would be refused BUSY for a
// name no one holds any more. So the name's record counts its lost holds
// until each was released, and its contender waits for them first (see
// contending.awaitLostRelease).

// lostRelease is a name's lost holds whose records are yet to be released
// in the masters: how many, a channel closed when the last one was, and
// when the latest is due (its validity's end, after which releaseAt sends
// it).
type lostRelease struct {
	n        int
	released chan struct{}
	due      time.Time
}

// releasingLostLocked counts the lost h in its name's lostRelease, once.
// Whoever releases its record calls lostReleased after. manager.mu is held.
func (a *Manager) releasingLostLocked(h *Hold) {
	if h.releasing {
		return
	}
	h.releasing = true
	n := a.nameLocked(h.rh.Name)
	if n.lostRelease == nil {
		n.lostRelease = &lostRelease{released: make(chan struct{})}
	}
	r := n.lostRelease
	r.n++
	if due := a.watchdog.Deadline(h.rh); due.After(r.due) {
		r.due = due
	}
}

// lostReleased notes that h's record was released in the masters (or
// will not be: the agent stops) if it was lost, and lets the LOCKs of its
// name go on once none is left. It may be called more than once, and for
// a hold that was not lost.
func (a *Manager) lostReleased(h *Hold) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !h.releasing {
		return
	}
	h.releasing = false
	n := a.names[h.rh.Name]
	if n == nil || n.lostRelease == nil {
		return
	}
	if n.lostRelease.n--; n.lostRelease.n == 0 {
		close(n.lostRelease.released)
		n.lostRelease = nil
		a.tidyLocked(n)
	}
}

// AfterLost logs h's loss and ends it in the masters (see lose); told is
// its LOST line's number in the session's outbox.
func (a *Manager) AfterLost(h *Hold, loss renewal.Loss, told uint64) {
	rh := h.rh
	args := []any{"name", rh.Name, "owner", h.owner, "fence", h.fence, "reason", loss.Reason}
	if loss.Why != "" {
		args = append(args, "why", loss.Why)
	}
	h.sess.Logger().Warn("hold lost", args...)
	at := a.watchdog.Deadline(rh)
	released := func() { a.lostReleased(h) }
	if !loss.Revoked() {
		a.releaseAt(rh, at, nil, released)
		return
	}
	// A majority can no longer renew a revoked hold: it is released as soon
	// as the client's socket took its LOST, so that the client can hear of
	// it before another is granted the name. A client that reads nothing
	// does not keep it past its validity.
	a.releaseAt(rh, at, func(until <-chan time.Time) { h.sess.AwaitWritten(told, until) }, released)
}

// LostNow says whether the client must be told LOST of h, one of its
// holds, now: the watchdog found it lost (or it was revoked) and lose has
// not come yet, or is under way. It is on its way, and an answer that
// depends on the loss (NOT_HELD, a new hold of the name) must come after
// the LOST (docs/protocol.md, ordering rule 3). If it was not ended yet,
// it is ended here. The caller tells the client (Client.TellLost) and
// calls AfterLost. h's session's mu is held.
func (a *Manager) LostNow(h *Hold) (renewal.Loss, bool) {
	loss, lost := a.watchdog.Lost(h.rh)
	if !lost {
		return loss, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	switch holderOf(h.rh) {
	case h:
		a.endLostLocked(h)
	case nil: // a lose of it is under way (detachLost): the caller tells the client
	default: // passed on to another local holder: not lost for this client
		return loss, false
	}
	return loss, true
}

// releaseAt releases a lost hold in the masters once its validity ended.
// Its LOST went out a lead before that, so that the client hears of it
// before anyone else can be granted the name; a release at once would let
// another client in while this one may still rely on its validity. (A
// ttl= hold that reached its end was told LOST there, where its validity
// ends: it is released at once.) If early is not nil, the release comes
// as soon as early returns, which it does by the deadline at the latest
// (it is given the deadline's timer). A stopping agent leaves the hold to
// expire. done, if not nil, is called once the release was answered, or
// will not be sent.
func (a *Manager) releaseAt(rh *renewal.Hold, deadline time.Time, early func(until <-chan time.Time), done func()) {
	go func() {
		if done != nil {
			defer done()
		}
		if d := deadline.Sub(a.clock.Now()); d > 0 {
			t := a.clock.NewTimer(d)
			defer t.Stop()
			if early != nil {
				early(t.C())
			} else {
				select {
				case <-t.C():
				case <-a.runCtx.Done():
				}
			}
			if a.runCtx.Err() != nil {
				return
			}
		}
		a.endHold(context.Background(), rh, false, false)
	}()
}

// Forget drops a hold from the agent's books before it is released, and
// says whether the release should be a hand-over (see endCohortLocked).
func (a *Manager) Forget(h *Hold) (handOver bool) {
	a.mu.Lock()
	cur := holderOf(h.rh)
	if cur != nil && cur != h {
		// Passed on to another local holder (see cohort.go): the record
		// in the masters is that holder's now.
		a.mu.Unlock()
		return false
	}
	if cur != nil { // not if it was lost already
		a.endHoldLocked(h)
		handOver = a.endCohortLocked(h)
	}
	a.dropCacheLocked(h)
	a.mu.Unlock()
	a.watchdog.Remove(h.rh)
	return handOver
}

// release drops a hold in the masters and lets local waiters try at once
// (but for a hand-over: see cohort.go).
func (a *Manager) release(ctx context.Context, name, holder string, handOver bool) {
	release := a.cluster.Release
	if handOver {
		release = a.cluster.HandOver
	}
	if _, err := release(ctx, name, holder); err != nil {
		a.log.Warn("release reached no master; the lease will expire", "name", name, "error", err)
	}
	a.pokeQueue(name)
}

func (a *Manager) releaseAsync(name, holder string) {
	go a.release(context.Background(), name, holder, false)
}

// ReleaseAll releases holds in one batched round per master and returns
// when it is done, then lets the names' local waiters try at once.
func (a *Manager) ReleaseAll(holds map[HoldKey]*Hold) {
	if len(holds) == 0 {
		return
	}
	keys := make([]quorum.RenewKey, 0, len(holds))
	var tailed []*renewal.Hold
	for _, h := range holds {
		if a.handOff(h) {
			continue
		}
		a.Forget(h)
		if h.rh.Tail {
			tailed = append(tailed, h.rh)
			continue
		}
		keys = append(keys, quorum.RenewKey{Name: h.rh.Name, Holder: h.rh.Holder})
	}
	a.endTailed(tailed)
	if len(keys) > 0 {
		a.cluster.ReleaseMany(context.Background(), keys)
	}
	for _, h := range holds {
		a.lostReleased(h) // lost as the session closed
	}
	for _, k := range keys {
		a.pokeQueue(k.Name)
	}
}

// LetGo ends h in the agent and the masters once its session let go of it
// (an UNLOCK, or a failed multi-lock's rollback): a lent record goes back
// to its cache or on, else the record is released, leaving its tail unless
// rollback (the acquisition was never answered). It may wait for the
// masters.
func (a *Manager) LetGo(ctx context.Context, h *Hold, rollback bool) {
	defer a.lostReleased(h) // if it was lost as its session let go
	if rollback {
		// The record goes as it is, tail or not.
		a.release(ctx, h.rh.Name, h.rh.Holder, a.Forget(h))
	} else if !a.cacheOrRelease(ctx, h) {
		a.endHold(ctx, h.rh, true, a.Forget(h))
	}
}

// Downgraded notes that h, exclusive, has only shared acquisitions left:
// the masters' record becomes shared (see Downgrade), so no exclusive
// holder may inherit it, and the holds gauge counts it shared.
func (a *Manager) Downgraded(h *Hold) {
	a.leaveCohort(h)
	a.mu.Lock()
	if holderOf(h.rh) == h {
		a.metrics.holdDowngraded(h)
	}
	a.mu.Unlock()
}

// Downgrade makes h's record shared in the masters.
func (a *Manager) Downgrade(ctx context.Context, h *Hold) error {
	return a.cluster.Downgrade(ctx, h.rh.Name, h.rh.Holder)
}

// SetEnd gives h an end (see EXTEND; a multi-lock's ttl=), and returns its
// validity, or false if it was lost. An end is this holder's, not the next
// one's: h leaves its run.
func (a *Manager) SetEnd(h *Hold, end time.Time) (time.Duration, bool) {
	a.leaveCohort(h)
	return a.watchdog.SetEnd(h.rh, end)
}

// Validity is what the watchdog knows of h's validity now; false if it no
// longer watches h's record.
func (a *Manager) Validity(h *Hold) (time.Duration, bool) { return a.watchdog.Validity(h.rh) }

// Tails: a hold with delay= (or lock.lock_delay) or min_hold= keeps its
// name unavailable after it ends (quorum.Tail). The masters keep the tail;
// the agent says how each hold ended: an UNLOCK is clean, anything else
// (the session closed, the hold was lost or revoked) is not.

// tailOf is the tail a LOCK asks for.
func tailOf(l protocol.Lock) quorum.Tail {
	return quorum.Tail{Delay: max(l.Delay, 0), MinHold: l.MinHold}
}

// endHold ends rh's record in the masters: a release for a hold without a
// tail (a hand-over, if handOver: see cohort.go), else an end that leaves
// its tail (see quorum.Cluster.End); clean says it was an UNLOCK. Then the
// name's local waiters try at once.
func (a *Manager) endHold(ctx context.Context, rh *renewal.Hold, clean, handOver bool) {
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
func (a *Manager) pokeQueue(name string) {
	if q := a.queueOf(name); q != nil {
		q.poke()
	}
}

// endTailed ends holds with a tail that a closing session left (see
// ReleaseAll), all at once: not clean.
func (a *Manager) endTailed(holds []*renewal.Hold) {
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

// OnRevoke is the masters' word that REVOKE (on any agent) ended the hold
// whose record is holder's: if it is one of this agent's, its client is
// told LOST with the reason, then the hold ends (its delay applies). The
// renewal would find it gone anyway, within a third of a lease. It is
// called from a master's subscriber: it must not block.
func (a *Manager) OnRevoke(holder, reason string) {
	go func() {
		rh := a.findHold(holder)
		if rh == nil || !a.watchdog.Revoke(rh, reason) {
			return // not this agent's, or told already (every master delivers it)
		}
		a.lose(rh, renewal.Revocation(reason))
	}()
}

// findHold is the watched record of holder among the sessions' holds, or nil.
func (a *Manager) findHold(holder string) *renewal.Hold {
	for _, c := range a.clients() {
		if h := c.FindHold(holder); h != nil {
			return h.rh
		}
	}
	return nil
}

// A hold's value (LOCK value=, SET) and the fence check (CHECK): see
// ../shared/coordination.md §1 and §5. The value lives in the holder's
// record on the masters; the agent keeps it in the hold's record for the
// watchdog (which re-creates the record where a master lacks it) and, for
// a name passed among local holders, in the run's record (which a
// hand-over writes, the new holder's value with it). A re-entrant LOCK's
// value= is ignored: the hold keeps its value until a SET.

// recordValue makes value the value of h's records in the agent: the one
// the watchdog re-creates, and its run's (see cohort.go), which is written
// to the masters again so that a hand-over's write in flight does not
// leave the old value. It says false if h is no longer live (lost, let go
// or passed on).
func (a *Manager) recordValue(h *Hold, value string) bool {
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

// SetValue makes value the value of h (SET): in the agent at once, and on a
// majority of the masters before it returns. held is false if h is no
// longer live.
func (a *Manager) SetValue(ctx context.Context, h *Hold, value string) (held bool, err error) {
	if !a.recordValue(h, value) {
		return false, nil
	}
	return true, a.cluster.SetValue(ctx, h.rh.Name, h.rh.Holder, value)
}
