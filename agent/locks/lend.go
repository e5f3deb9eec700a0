package locks

import (
	"context"
	"math"
	"time"

	"github.com/lock-agent/lock-agent/protocol"
	"github.com/lock-agent/lock-agent/quorum"
	"github.com/lock-agent/lock-agent/renewal"
)

// Lending. A round on the masters per LOCK and per UNLOCK costs most of a
// short hold, and most of it is spent where the name goes from one local
// client to another, or back to the same one. So this agent may keep a
// record it holds in the masters, with a block of fences reserved there,
// and lend it to its local holders one at a time, each with the next fence
// of the block: their LOCKs are answered with no round on the masters. A
// lending has one of two policies:
//
//   - A run (cohort.go): an exclusive lock's holder lets go while the next
//     waiter of this agent's queue wants the same kind of hold; the record
//     is passed to that waiter inside the agent, and on down the queue for
//     as long as local waiters queue, until another agent waits past
//     cohort_max_hold or the fences run out.
//   - A linger (cache.go): the last local holder lets go and no local
//     request waits; the record stays in the masters, marked cached, for up
//     to cache_linger, and a local LOCK meanwhile is lent it.
//
// Either way the masters' record stays under its holder id, renewed by the
// watchdog like any hold; each holder gets a hold of its own (count 1), and
// the masters learn of the new holder only after the client was answered,
// so WHO and CHECK on this agent correct what the masters show (ownView,
// ownCheck). A run's new holder is written within retagEvery (a retag); a
// linger's lendings and returns send the masters nothing: the agent notes
// what changed of all its caches together, at most once per renewal tick
// (NoteCaches), and CHECK on another agent counts a fence above the noted
// one of a cache's exclusive record as current (see quorum/scripts/lua/check.lua).
// A lending that goes on reserves a further block of fences before its
// block is used up (reserve).
//
// Safety. Exclusion: the record stays in the masters from the grant that
// made it until the agent releases it, which it does only while no local
// client holds it; and the agent lends it to one local holder at a time: it
// ends one local hold before it starts the next, under the locks that order
// every grant (session.mu, manager.mu, queue.mu). Another agent is granted the
// name only once the record is released. Validity: a record is lent only
// while the watchdog knows it valid for half a lease or more (lendValidity),
// so a new holder never starts on a record about to be lost; a loss of the
// record reaches whoever holds it then as * LOST, as for any hold, and ends
// the lending (a record lost while no client holds it ends without a word,
// and the next LOCK goes to the masters). Fences: the grant reserved F …
// F+B-1 on a majority (quorum.AcquireRequest.FenceBlock: every later
// grant, anywhere, counts past F+B-1), and the lending hands out F+1, F+2,
// … in order and stops at F+B-1, or goes on with a further block that a
// majority reserved past every fence given out before
// (quorum.Cluster.Reserve) while the record was there. So a lent fence is
// above every fence any agent was granted before, and below every fence a
// later grant gets.
//
// Kinds (lendable). A record is lent only to a LOCK of the mode it was
// granted with, kept by the watchdog with no end: not to a semaphore
// (limit=), a ttl= hold, fair=true, nor one with delay= or min_hold=. Their
// records say more than who holds them (a slot, a queue place, a tail) and
// a record lent on would have to carry or undo it. A run passes exclusive
// locks only, value= and notify=wanted ones too (the hand-over writes the
// new holder's value: see recordValue, hold.go); a linger lends shared locks too, but
// not holds with value= or notify=wanted, nor a multi-lock's names.
//
// Other agents. An agent whose attempt finds a lent record in its way says
// so on the name's channel (quorum.Cluster.Wanted); the lending agent,
// subscribed while it lends, then lends on no more than it must: a run
// ends at the first release after cohort_max_hold from its grant, a
// linger is given up at once if no client holds it, and lent to no one
// after if one does. Each policy's file says how.

// lendPolicy is how a lending lends its record: see the top of this file.
type lendPolicy int

const (
	lendRun    lendPolicy = iota // passed among local holders while local waiters queue (cohort.go)
	lendLinger                   // kept past its last local holder, for the next (cache.go)
)

// lending is a record this agent holds in the masters and lends to its
// local holders. Its fields are guarded by manager.mu.
type lending struct {
	policy lendPolicy
	name   string
	rh     *renewal.Hold // the record, renewed by the watchdog; its Owner is the current holder
	mode   protocol.Mode // the record's claim: a LOCK of another mode is not lent it
	// record is the record as the masters should hold it: the current
	// holder's fence and who-info (see retagLocked), and the block's end.
	record quorum.Record
	// next and top are the fences left of its block; spare is the first
	// fence of a further reserved block (0: none), of block fences.
	next, top, spare int64
	block            int
	wanted           bool // another agent said it waits for the name
	// reserving says a further block is being reserved; reserveFailed that
	// a reservation failed: it lends on until its blocks are used up.
	reserving, reserveFailed bool
	// retag says the holder changed since the record was last sent to the
	// masters.
	retag bool
	// A linger's: whether its keeper made the first note (until then the
	// batch skips it: see keepCache), and whether it is in manager.toNote.
	noted, toNote bool

	// A run's: when the masters granted it (cohort_max_hold and refillFor
	// count from it), and whether retagLoop is sending its record.
	started   time.Time
	retagging bool

	// A linger's: the local holder it is lent to (nil while cached), since
	// when none holds it, whether it was given up (out of its name), and
	// its keeper's wake-up (it ended).
	holder    *Hold
	idleSince time.Time
	ended     bool
	wake      chan struct{}
}

// lendable says whether l, a LOCK of one name, may take part in a lending
// of policy p: be lent its record, and have its own record lent on (see
// Kinds at the top of this file).
func lendable(l protocol.Lock, p lendPolicy) bool {
	plain := limitOf(l) == 1 && l.TTL == 0 && !l.Fair && !tailOf(l).Any()
	if p == lendRun {
		return plain && l.Mode != protocol.Shared
	}
	return plain && l.Value == "" && !l.NotifyWanted
}

// lendValidity is rh's validity, and whether its record may be lent to a
// new holder, or kept to be lent: the watchdog knows it valid for half a
// lease or more. Every lending asks it before it lends.
func (a *Manager) lendValidity(rh *renewal.Hold) (time.Duration, bool) {
	v, ok := a.watchdog.Validity(rh)
	return v, ok && v >= a.cfg.Lease/2
}

// fenceBlock is how many fences an attempt for q's head w reserves: a
// run's block when the waiter behind w could take the name from it; a
// few when its record may be cached and lent on (cacheGrantBlock); else
// one (no fences are spent on a lending that cannot start).
func (a *Manager) fenceBlock(q *queue, w *Waiter) int {
	least := 1
	if a.cacheOn() && lendable(w.req, lendLinger) && w.done == nil && w.reused {
		least = cacheGrantBlock
	}
	if !a.cohortOn() || !lendable(w.req, lendRun) {
		return least
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.waiters) < 2 || q.waiters[0] != w || !lendable(q.waiters[1].req, lendRun) {
		return least
	}
	return a.cohortBlock()
}

// startLendingLocked puts l in its name's record, if the name lends no
// other record, and says whether it did. Every lending starts here.
// manager.mu is held.
func (a *Manager) startLendingLocked(l *lending) bool {
	n := a.nameLocked(l.name)
	if n.lent != nil {
		// Only a record lost on the masters, and not yet found lost by
		// the watchdog, could still be lent: this one is not.
		a.tidyLocked(n)
		return false
	}
	n.lent = l
	return true
}

// stopLendingLocked takes l out of its name's record: it lends no more.
// manager.mu is held.
func (a *Manager) stopLendingLocked(l *lending) {
	if n := a.names[l.name]; n != nil && n.lent == l {
		n.lent = nil
		a.tidyLocked(n)
	}
}

// lendsLocked says whether l is its name's lending. manager.mu is held.
func (a *Manager) lendsLocked(l *lending) bool {
	n := a.names[l.name]
	return n != nil && n.lent == l
}

// lendLocked is the hand-over: it lends l's record to a new hold of c for
// req (the caller makes it c's), with the next fence of its block (the spare block takes over once
// the block is used up), makes it the record's live holder, and has the
// masters told (see retagLocked): who is the new holder's who-info. A
// master that lacks the record gets it back with the new holder's fence.
// The caller checked that l may lend (lendValidity, fences left) and ended
// the previous holder. c's mu and manager.mu are held.
func (a *Manager) lendLocked(l *lending, c Client, req protocol.Lock, who quorum.Who) *Hold {
	if l.next > l.top && l.spare > 0 {
		l.next, l.top, l.spare = l.spare, l.spare+int64(l.block)-1, 0
	}
	h := &Hold{rh: l.rh, sess: c, owner: req.Owner, fence: l.next, acquired: []protocol.Mode{req.Mode}, mode: req.Mode,
		limit: 1, granted: time.Now(), gaugeMode: req.Mode, lent: l, notifyWanted: req.NotifyWanted,
		cacheable: l.policy == lendLinger}
	l.next++
	if l.policy == lendLinger && l.reserveDue() {
		l.reserving = true
		go a.reserve(l)
	}
	a.startHoldLocked(h)
	who.SinceMilli = time.Now().UnixMilli()
	l.record.Fence, l.record.Who = h.fence, who
	a.watchdog.SetRecord(l.rh, l.record)
	a.retagLocked(l)
	return h
}

// retagLocked has l's current holder written into its record on the
// masters: in the next batch of notes, for a linger (see NoteCaches); by
// retagLoop, started if it is not running, for a run. manager.mu is held.
func (a *Manager) retagLocked(l *lending) {
	l.retag = true
	switch {
	case l.policy == lendLinger:
		a.noteLaterLocked(l)
	case !l.retagging:
		l.retagging = true
		go a.retagLoop(l)
	}
}

// retagEvery spaces the rewrites of a lent record's who-info, so that a
// fast run costs the masters at most one small script per interval.
const retagEvery = 10 * time.Millisecond

// retagLoop writes run's current holder into its record on the masters, at
// most once per retagEvery, until the holder stops changing or the run ends.
func (a *Manager) retagLoop(run *lending) {
	ctx := a.runCtx
	for {
		a.mu.Lock()
		if !run.retag || holderOf(run.rh) == nil || ctx.Err() != nil {
			run.retagging = false
			a.mu.Unlock()
			return
		}
		run.retag = false
		record := run.record
		a.mu.Unlock()
		a.cluster.Retag(ctx, run.name, run.rh.Holder, record)
		t := time.NewTimer(retagEvery)
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
}

// reserve reserves a further block of fences for l's record on the masters
// (quorum.Cluster.Reserve), which becomes l's spare, and the end of the
// record's block, which the watchdog writes back to a master that lost the
// record. The caller set l.reserving. A failure is not tried again: l
// lends on until its blocks are used up.
func (a *Manager) reserve(l *lending) {
	first, err := a.cluster.Reserve(a.runCtx, l.name, l.rh.Holder, l.block)
	a.mu.Lock()
	defer a.mu.Unlock()
	l.reserving = false
	if err != nil {
		l.reserveFailed = true
		return
	}
	switch l.policy {
	case lendRun:
		if !a.lendsLocked(l) || l.wanted { // over, or to end within its block
			return
		}
	case lendLinger:
		if l.ended {
			return
		}
	}
	l.spare = first
	l.record.Top = first + int64(l.block) - 1
	a.watchdog.SetRecord(l.rh, l.record)
}

// ownView is r, holder's record of name as the masters showed it,
// corrected by what this agent knows, if the record is one it lends: the
// masters learn that it was lent, came back or was passed on only after
// the client was answered (a retag), and this agent's WHO must show its own
// client's LOCK or UNLOCK that came before it.
func (a *Manager) ownView(name, holder string, r quorum.Record) quorum.Record {
	a.mu.Lock()
	defer a.mu.Unlock()
	l := a.lentLocked(name)
	switch {
	case l == nil || l.rh.Holder != holder:
	case l.policy == lendLinger:
		r.Fence, r.Who, r.Cached = l.record.Fence, l.record.Who, l.holder == nil
	case holderOf(l.rh) != nil:
		// A local holder has it: not cached, whatever mark the masters
		// still carry (a cache turned into a run unmarks them in the
		// background: a WHO in between showed the holder as cached, n=0).
		r.Fence, r.Who, r.Cached = l.record.Fence, l.record.Who, false
	}
	return r
}

// ownCheck answers CHECK of fence on name from what this agent knows
// (mine), if fence is of a record it lends: a cached record's fence is
// current while it is lent; its current holder's fence is current, and,
// for an exclusive record (a run's, or a cache's), every earlier fence of
// the name is not (no other agent holds it meanwhile), nor, for a cache's,
// one of its blocks not lent yet. The masters learn
// that a record was lent, came back or was passed on only after the client
// was answered (a cache's, only at its next note: they count every fence
// above the noted one of a cache's exclusive record as current).
func (a *Manager) ownCheck(name string, fence uint64) (current, mine bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	l := a.lentLocked(name)
	switch {
	case l == nil:
	case l.policy == lendLinger && (fence == uint64(l.record.Fence) || l.mode == protocol.Exclusive && fence <= uint64(l.lastFence())):
		// Every fence of an exclusive cache's blocks is its lendings':
		// only its holder's is current, one not lent yet is not.
		return fence == uint64(l.record.Fence) && l.holder != nil, true
	case l.policy == lendRun && holderOf(l.rh) != nil && fence <= uint64(l.record.Fence):
		return fence == uint64(l.record.Fence), true
	}
	return false, false
}

// Holders is who holds name as a majority of the masters records it (WHO),
// each record corrected by what this agent knows (ownView).
func (a *Manager) Holders(ctx context.Context, name string) ([]quorum.Record, error) {
	hs, err := a.cluster.Who(ctx, name)
	if err != nil {
		return nil, err
	}
	records := make([]quorum.Record, len(hs))
	for i, h := range hs {
		records[i] = a.ownView(name, h.ID, h.Record)
	}
	return records, nil
}

// Check says whether fence is the fence of a current holder of name (CHECK):
// this agent answers for the records it lends (ownCheck), a majority of the
// masters for the rest.
func (a *Manager) Check(ctx context.Context, name string, fence uint64) (bool, error) {
	current, mine := a.ownCheck(name, fence)
	if !mine && fence <= math.MaxInt64 { // no fence is larger
		return a.cluster.Check(ctx, name, int64(fence))
	}
	return current, nil
}

// lastFence is the last fence l may lend: its block's end, or its spare
// block's. manager.mu is held.
func (l *lending) lastFence() int64 {
	if l.spare > 0 {
		return max(l.top, l.spare+int64(l.block)-1)
	}
	return l.top
}
