package quorum

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/lock-agent/lock-agent/quorum/rules"
	"github.com/lock-agent/lock-agent/quorum/scripts"
)

// AcquireRequest asks for one name for one holder.
type AcquireRequest struct {
	Name string
	// Holder identifies this attempt across all agents. It must be new for
	// every attempt: once released, a holder id is refused for Quarantine.
	Holder string
	Lease  time.Duration // the lease set on each master
	Claim  Claim
	Who    Who // recorded with the hold
	// Entry is the claim's place in the name's queue (see Enqueue), if it
	// has one: it may then pass the entries behind it. Without one it may
	// pass no conflicting entry.
	Entry *Entry
	// FenceBlock is how many fences the grant reserves (see scripts/lua/acquire.lua):
	// the grant's fence and the FenceBlock-1 after it, which the caller may
	// hand to later holders of the same hold. 0 or 1: one.
	FenceBlock int
	// Tail keeps the name unavailable after the hold ends (see scripts/lua/tails.lua);
	// the zero Tail: not at all.
	Tail Tail
}

// block is how many fences req's grant reserves.
func (req AcquireRequest) block() int64 { return int64(max(req.FenceBlock, 1)) }

// lean says req is the most common request, a plain exclusive or shared
// lock (no semaphore, queue entry, fence block, tail or value), which the
// lean script serves (see scripts/lua/acquire_lean.lua): a fresh name costs each
// master a few calls, not the general script's dozen.
func (req AcquireRequest) lean() bool {
	return req.Claim.limit() == 1 && req.Entry == nil && req.block() == 1 && !req.Tail.Any() && req.Who.Value == ""
}

// acquireCall is the acquire script for req, with its keys and arguments.
func (c *Cluster) acquireCall(req AcquireRequest) (s *scripts.Script, keys, args []string) {
	keys, args = c.acquireArgs(req)
	if req.lean() {
		return scripts.AcquireLean, keys, args[:scripts.LeanArgs]
	}
	return scripts.Acquire, keys, args
}

// Grant is a won acquire.
type Grant struct {
	Fence int64
	Slot  int // a semaphore's slot; 0 for a lock
	// Record is what the masters hold for this grant: the watchdog
	// re-creates it on a master that lacks it (see Renew).
	Record Record
	// Deadline is when the hold stops being known valid unless renewed:
	// the round's start + lease − drift.
	Deadline time.Time
}

// Acquire tries once to win req.Name on a majority. It returns as soon as the
// outcome is certain. On failure it releases whatever it won, and returns
// what the masters answered: a Refusal of ErrBusy when they answered that
// someone else holds the name, of ErrConflict when a majority holds it for
// another kind of claim, else of ErrNoQuorum (also when the round never
// got its turn: ErrOverloaded or ctx's error is then among Masters). The
// error is for a round that could not run at all: ErrClosed, an invalid slot.
func (c *Cluster) Acquire(ctx context.Context, req AcquireRequest) (Grant, *Refusal, error) {
	if c.closed() {
		return Grant{}, nil, ErrClosed
	}
	if l := req.Claim.limit(); req.Claim.Slot < 0 || req.Claim.Slot > l || (l == 1 && req.Claim.Slot != 0) {
		return Grant{}, nil, fmt.Errorf("quorum: slot %d of a claim with limit %d", req.Claim.Slot, l)
	}
	c.awaitGiveBacks(ctx, req.Name)
	answers := &acquireAnswers{c: c, fences: make([]int64, len(c.masters)), slots: make([]int, len(c.masters))}
	s, keys, args := c.acquireCall(req)
	var g Grant
	var refusal *Refusal
	_, never := c.vote(ctx, roundSpec{op: OpAcquire, script: s, keys: keys, args: args, early: true, budget: req.Lease / 4,
		judge: answers.judge, decide: func(r *round) { g, refusal = c.decideAcquire(ctx, req, answers, r) }})
	if never != nil {
		return Grant{}, never, nil
	}
	return g, refusal, nil
}

// acquireAnswers is what the masters answered an acquire round, as its
// judge reads them.
type acquireAnswers struct {
	c         *Cluster
	fences    []int64         // > 0 where granted
	slots     []int           // the slot granted there
	busyOn    []int           // masters that answered held: their counters may lag
	awaiting  bool            // a master's record awaits the mark (see awaitingAgent)
	conflicts int             // masters that hold the name for another kind of claim
	readers   int             // busy answers where only shared holders block
	cached    int             // busy answers where only cached records block
	kept      int             // busy answers where only records caching agents keep block
	heldLimit int             // the limit of the last conflict
	waits     []time.Duration // what each busy master answered is left of its holders (see FreeOnMajorityIn)
}

// judge reads master a.i's answer to the acquire script.
func (x *acquireAnswers) judge(a answer) (int, bool, error) {
	vals, err := a.res.AsIntSlice()
	switch {
	case err != nil:
		return 0, false, err
	case isGrant(vals):
		x.fences[a.i], x.slots[a.i] = vals[1], int(vals[2])
		x.awaiting = x.awaiting || awaits(vals)
		return x.slots[a.i], true, nil
	case len(vals) < 2 || len(vals) > 5:
		return 0, false, errors.New("unexpected acquire reply")
	case vals[0] == -3:
		x.conflicts++
		x.heldLimit = int(vals[1])
		return 0, false, nil
	}
	if err := x.c.quarantineLeft(a.i, vals); err != nil {
		return 0, false, err
	}
	x.busyOn = append(x.busyOn, a.i)
	x.waits = append(x.waits, time.Duration(vals[1])*time.Millisecond)
	if len(vals) >= 3 && vals[2] == 1 {
		x.readers++
	}
	if len(vals) >= 4 && vals[3] == 1 {
		x.cached++
	}
	if len(vals) == 5 && vals[4] == 1 {
		x.kept++
	}
	return 0, false, nil
}

// isGrant says an acquire reply is a grant: {1, fence, slot}, or
// {1, fence, slot, 1} when its record awaits the mark (see awaits).
func isGrant(vals []int64) bool { return (len(vals) == 3 || len(vals) == 4) && vals[0] == 1 }

// awaits says a grant's record awaits its agent's mark (see awaitingAgent):
// the name is observed there.
func awaits(vals []int64) bool { return len(vals) == 4 && vals[3] == 1 }

// decideAcquire decides an acquire round r whose answers are in: a won
// round is completed (see complete); a lost one, or a won one that could
// not be completed, gives back whatever it may have won.
func (c *Cluster) decideAcquire(ctx context.Context, req AcquireRequest, x *acquireAnswers, r *round) (Grant, *Refusal) {
	n := len(c.masters)
	busy := len(x.busyOn) + x.conflicts
	outcome, slot := rules.DecideSlots(n, r.granted, busy+r.failed)
	unread := n - r.yes() - busy - r.failed // answers a decided round did not wait for
	refusal := &Refusal{Kind: ErrNoQuorum, Yes: r.yes(), Busy: len(x.busyOn), Needed: c.quorum, HeldLimit: x.heldLimit,
		RetryAfter: rules.FreeOnMajorityIn(x.waits, r.yes()+unread, c.quorum), BestSlot: slot, OnlyReaders: x.readers > 0 && x.readers == len(x.busyOn),
		OnlyCached: x.cached > 0, OnlyKept: x.kept > 0, Masters: r.errs, Size: n}
	switch {
	case outcome == rules.Won:
		g, err := c.complete(ctx, req, x, r, slot)
		if err == nil {
			return g, nil
		}
		refusal.Masters = append(refusal.Masters, err)
	case c.settingsKind(r.errs):
		// A majority records other settings: this agent may not grant,
		// however long it waits.
		refusal.Kind = ErrSettings
	case x.conflicts >= c.quorum:
		// A majority holds the name for another kind of claim: waiting
		// would not help.
		refusal.Kind = ErrConflict
	case r.failed <= n-c.quorum:
		// Enough masters answered that, uncontended, a majority was
		// possible: the name is held elsewhere (or the vote split). Only
		// failures that alone rule out a majority make it NO_QUORUM.
		refusal.Kind = ErrBusy
	}
	if refusal.Yes > 0 || busy < r.sent {
		// Something may have been granted (or may yet be, by an answer not
		// read): give it back. A round every master refused granted nothing.
		c.releaseAsync(req.Name, req.Holder)
	}
	return Grant{}, refusal
}

// complete makes a round that won slot a grant: the masters that granted
// another slot give it back, the fence is settled (see settleFence), the
// masters that lag behind it are brought up to it, and the grant stands if
// its validity is not used up.
func (c *Cluster) complete(ctx context.Context, req AcquireRequest, x *acquireAnswers, r *round, slot int) (Grant, error) {
	gaveBack := false
	for i := range x.fences { // the masters that granted another slot give it back
		if x.fences[i] > 0 && x.slots[i] != slot {
			x.fences[i] = 0
			c.releaseOn(req.Name, req.Holder, i)
			gaveBack = true
		}
	}
	record := c.keys.Holder(req.Name, req.Holder)
	fence, err := c.settleFence(ctx, req.Name, record, req.block(), x.fences)
	if err == nil && len(x.busyOn) > 0 {
		c.raiseFence(req.Name, record, fence, req.block(), x.busyOn, false)
	}
	// Masters whose answer was not read yet are brought up to the fence as
	// their answers come: a master that missed this grant must not count
	// below it in a later majority. One that granted another slot gives it
	// back. One that refused or failed leaves readers in need of the mark
	// (see markSettled), once the grant stood; one whose record awaits it
	// gets it then.
	late := &lateAnswers{c: c, req: req, x: x, record: record, fence: fence, slot: slot}
	r.late = late.answer
	validity := rules.Validity(req.Lease, c.clock.Now().Sub(r.start), c.cfg.DriftFactor)
	switch {
	case err != nil:
		return Grant{}, err
	case validity <= 0:
		return Grant{}, errors.New("validity used up before the grant completed")
	}
	late.stood = true
	// A master that refused the grant (busy, a conflict), failed it, or
	// gave its slot back has a next fence a reader cannot tell from one
	// that has not run the grant yet. A record that awaits the mark is
	// no term without it.
	if x.awaiting || len(x.busyOn) > 0 || x.conflicts > 0 || r.failed > 0 || gaveBack {
		c.markSettled(req.Name, record, fence, req.block(), x.fences)
		late.marked = true
	}
	claim := req.Claim
	claim.Slot = slot
	rec := Record{Claim: claim, Fence: fence, Top: fence + req.block() - 1, Who: req.Who, Tail: req.Tail}
	if req.Tail.MinHold > 0 {
		rec.MinUntil = c.clock.Now().Add(req.Tail.MinHold)
	}
	return Grant{Fence: fence, Slot: slot, Record: rec, Deadline: r.start.Add(rules.Validity(req.Lease, 0, c.cfg.DriftFactor))}, nil
}

// lateAnswers follows the answers of a grant's round that come after
// complete read it (see drain), one at a time. stood and marked are set
// before complete returns, and the answers come after.
type lateAnswers struct {
	c      *Cluster
	req    AcquireRequest
	x      *acquireAnswers
	record string
	fence  int64
	slot   int
	// stood says the grant stood; marked that its fence was marked settled.
	stood, marked bool
}

// answer brings one late master up to the grant (see complete).
func (l *lateAnswers) answer(a answer) {
	c, req := l.c, l.req
	vals, err := a.res.AsIntSlice()
	granted := err == nil && isGrant(vals)
	switch {
	case l.fence == 0:
		return
	case granted && int(vals[2]) != l.slot:
		c.releaseOn(req.Name, req.Holder, a.i)
	case err == nil && (!granted || vals[1] != l.fence):
		c.raiseFence(req.Name, l.record, l.fence, req.block(), []int{a.i}, l.stood)
	case l.stood && awaits(vals):
		c.writeFence(req.Name, l.record, l.fence, req.block(), []int{a.i}, true)
	}
	if !granted && l.stood && !l.marked {
		c.markSettled(req.Name, l.record, l.fence, req.block(), l.x.fences)
		l.marked = true
	}
}

// acquireArgs are the acquire script's keys and arguments for req.
func (c *Cluster) acquireArgs(req AcquireRequest) (keys, args []string) {
	keys = []string{c.keys.Set(req.Name), c.keys.Fence(req.Name), c.keys.Holder(req.Name, req.Holder), c.keys.Marker(),
		c.keys.Queue(req.Name), c.keys.Deadlines(req.Name), c.keys.Observed(req.Name)}
	entry := ""
	if req.Entry != nil {
		entry = req.Entry.Member()
	}
	args = append([]string{req.Holder, strconv.FormatInt(req.Lease.Milliseconds(), 10), c.keys.HolderPrefix(req.Name)}, c.gateArgs()...)
	args = append(args, string(req.Claim.mode()), strconv.Itoa(req.Claim.limit()), strconv.Itoa(req.Claim.Slot),
		req.Who.Agent, strconv.Itoa(req.Who.PID), strconv.Itoa(req.Who.UID), req.Who.Owner, strconv.FormatInt(req.Who.SinceMilli, 10), entry,
		strconv.FormatInt(req.block(), 10))
	args = append(args, req.Tail.args()...) // always given: the value follows them
	return keys, append(args, req.Who.Value)
}

// settleFence makes the grant's fence strictly greater than every earlier
// grant's: the token is the highest counter among the granting majority, and
// it (with the end of its block: see scripts/lua/acquire.lua; every master granted the
// same block size, so the highest fence ends the highest block) is written
// back to every granting master behind it before the grant is
// answered (so that the majority of the next grant, which must overlap this
// one, counts past it), with the record fixed to carry it. With a majority
// in step, as when uncontended, nothing is waited for.
func (c *Cluster) settleFence(ctx context.Context, name, record string, block int64, fences []int64) (int64, error) {
	fence, atFence, behind := rules.SettleFence(fences)
	if atFence >= c.quorum {
		if len(behind) > 0 { // a majority is in step: the rest need not hold up the grant
			c.raiseFence(name, record, fence, block, behind, false)
		}
		return fence, nil
	}
	c.cfg.Observer.FenceWriteBack(len(behind), true)
	// As long as a round would wait (see Patience): a write-back cut off
	// at master_timeout on a busy host failed a grant a majority gave.
	opCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.patience())
	keys, args := c.raiseFenceArgs(name, record, fence, block, false)
	results := make(chan error, len(behind))
	for _, i := range behind {
		go func() {
			_, err := c.masters[i].eval(opCtx, scripts.RaiseFence, keys, args).AsInt64()
			results <- err
		}()
	}
	var errs []error
	read := 0
	for ; read < len(behind) && atFence < c.quorum; read++ {
		if err := <-results; err != nil {
			errs = append(errs, err)
		} else {
			atFence++
		}
	}
	// The rest need not hold up the grant, but they still land: they are
	// waited for in the background before their deadline is let go.
	c.goBackground(func() {
		for range len(behind) - read {
			<-results
		}
		cancel()
	})
	if atFence < c.quorum {
		return 0, &MasterError{"fence", errors.Join(errs...)}
	}
	return fence, nil
}

// markSettled marks fence settled in the records of the masters that
// granted it (fences holds each master's granted fence), in the
// background. A grant that stood calls it when some master refused it or
// failed: a reader cannot tell such a master from one that has not run
// the grant yet, which would give it a higher fence (see Cluster.Leader);
// and when the name is observed: its records await the mark (see
// awaitingAgent). When every master grants an unobserved name, each
// records the fence once the write-backs landed, and nothing more is
// written. The write-backs do not mark: they go before the grant is known
// to stand (its validity may be used up), and a grant that did not stand
// must not read as a term.
func (c *Cluster) markSettled(name, record string, fence, block int64, fences []int64) {
	var granted []int
	for i, f := range fences {
		if f > 0 {
			granted = append(granted, i)
		}
	}
	c.writeFence(name, record, fence, block, granted, true)
}

// raiseFenceArgs are scripts/lua/raise_fence.lua's keys and arguments: name's counter to
// the end of fence's block, and the record (a holder key; "": none) to carry
// fence, with mark marked settled.
func (c *Cluster) raiseFenceArgs(name, record string, fence, block int64, mark bool) (keys, args []string) {
	keys = []string{c.keys.Fence(name)}
	args = []string{strconv.FormatInt(fence, 10), strconv.FormatInt(fence+block-1, 10)}
	if record != "" {
		keys = append(keys, record, c.keys.Observed(name))
		flag := "0"
		if mark {
			flag = "1"
		}
		args = append(args, c.keys.Channel(name), flag)
	}
	return keys, args
}

// raiseFence brings req's name's counter on the masters to at least the end
// of fence's block (and a record of req there to carry fence), in the background.
func (c *Cluster) raiseFence(name, record string, fence, block int64, to []int, mark bool) {
	c.cfg.Observer.FenceWriteBack(len(to), false)
	c.writeFence(name, record, fence, block, to, mark)
}

// writeFence is raiseFence's write, which markSettled also sends: the
// masters there are at fence already, so it is no write-back to count.
func (c *Cluster) writeFence(name, record string, fence, block int64, to []int, mark bool) {
	keys, args := c.raiseFenceArgs(name, record, fence, block, mark)
	for _, i := range to { // each on its own: a paused master must not keep it from the others
		c.goBackground(func() {
			ctx, cancel := context.WithTimeout(context.Background(), max(20*c.cfg.MasterTimeout, time.Second))
			defer cancel()
			c.masters[i].eval(ctx, scripts.RaiseFence, keys, args)
		})
	}
}

// Reserve reserves a further block of fences for holder's hold of name,
// which its agent passes among local holders (see
// AcquireRequest.FenceBlock), and returns the block's first fence. It
// counts as a grant does: a majority that still has the hold each takes
// block fences from its counter, the first fence is the highest of
// theirs, so past every fence any grant (and the hold's earlier blocks)
// gave out, and the block's end is settled on that majority before it
// returns, so every later grant counts past it. The record keeps the
// fence of its current holder. It waits for its turn among rounds
// (MaxRounds) like a grant, and the Observer counts its calls as acquires.
func (c *Cluster) Reserve(ctx context.Context, name, holder string, block int) (int64, error) {
	if c.closed() {
		return 0, ErrClosed
	}
	keys := []string{c.keys.Set(name), c.keys.Fence(name), c.keys.Holder(name, holder), c.keys.Marker()}
	args := append(append([]string{holder}, c.gateArgs()...), strconv.Itoa(block))
	fences := make([]int64, len(c.masters)) // > 0 where reserved
	var fence int64
	var err error
	_, never := c.vote(ctx, roundSpec{op: OpAcquire, script: scripts.Reserve, keys: keys, args: args, early: true,
		judge: func(a answer) (int, bool, error) {
			vals, err := a.res.AsIntSlice()
			switch {
			case err != nil:
				return 0, false, err
			case len(vals) == 2 && vals[0] == 1:
				fences[a.i] = vals[1]
				return 0, true, nil
			}
			return 0, false, c.quarantineLeft(a.i, vals)
		},
		// A late block is the master's own: it only counts past it.
		decide: func(r *round) {
			if r.yes() < c.quorum {
				err = c.noQuorumErr(r)
				return
			}
			fence, err = c.settleFence(ctx, name, "", int64(block), fences)
		}})
	if never != nil {
		return 0, never.Err()
	}
	return fence, err
}
