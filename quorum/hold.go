package quorum

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lock-agent/lock-agent/quorum/hashslot"
	"github.com/lock-agent/lock-agent/quorum/rules"
	"github.com/lock-agent/lock-agent/quorum/scripts"
	"github.com/redis/rueidis"
)

// releaseOn gives back, on master i alone, a grant of a slot that lost.
func (c *Cluster) releaseOn(name, holder string, i int) {
	keys, args := c.releaseArgs(name, holder, c.giveBack)
	c.goBackground(func() {
		ctx, cancel := context.WithTimeout(context.Background(), max(20*c.cfg.MasterTimeout, time.Second))
		defer cancel()
		c.masters[i].eval(ctx, scripts.Release, keys, args)
	})
}

// releaseArgs are the release script's keys and arguments; message is the
// release message: the name for a release, c.giveBack or c.handover.
func (c *Cluster) releaseArgs(name, holder, message string) (keys, args []string) {
	return []string{c.keys.Set(name), c.keys.Holder(name, holder)},
		[]string{holder, c.keys.Channel(name), message, strconv.FormatInt(c.cfg.Tombstone.Milliseconds(), 10)}
}

// releaseAsync gives back a failed round's partial grants in the background.
// Its release message wakes other agents' waiters (the round's grants may
// have landed late on every master and look like a holder to them) but not
// this agent's own, which would only fail again at once. If the release
// lands before an acquire still on its way (waiting for a batch, say), its
// tombstone makes that acquire refuse.
//
// An Acquire of the name by this agent waits for it (awaitGiveBacks): the
// give-back's own message wakes no waiter here, so an attempt that read a
// master still holding the round's grant was refused for this agent's own
// record, and its waiter parked until the record's lease would end, longer
// than its wait= (TestAHungMasterCostsNothing's "28 BUSY" with one master
// paused: a round split by the holder's release, its grant on the other
// master given back in the background, the next attempt read it there).
func (c *Cluster) releaseAsync(name, holder string) {
	done := c.givingBackStart(name)
	c.goBackground(func() {
		defer done()
		if c.giveBackHook != nil {
			c.giveBackHook()
		}
		c.release(context.Background(), name, holder, c.giveBack)
	})
}

// giveBacks is a name's give-backs in flight: how many, and a channel
// closed when the last was answered.
type giveBacks struct {
	n    int
	done chan struct{}
}

// givingBackStart counts a give-back of name, and returns what ends it.
func (c *Cluster) givingBackStart(name string) (end func()) {
	c.givingBackMu.Lock()
	defer c.givingBackMu.Unlock()
	if c.givingBack == nil {
		c.givingBack = map[string]*giveBacks{}
	}
	g := c.givingBack[name]
	if g == nil {
		g = &giveBacks{done: make(chan struct{})}
		c.givingBack[name] = g
		c.givingBackN.Add(1)
	}
	g.n++
	return func() {
		c.givingBackMu.Lock()
		defer c.givingBackMu.Unlock()
		if g.n--; g.n == 0 {
			close(g.done)
			delete(c.givingBack, name)
			c.givingBackN.Add(-1)
		}
	}
}

// awaitGiveBacks waits until this agent's give-backs of name in flight were
// answered (a majority, as a release), or ctx ends, or 10 master timeouts:
// a slower give-back leaves the attempt to meet its record, as before.
func (c *Cluster) awaitGiveBacks(ctx context.Context, name string) {
	if c.givingBackN.Load() == 0 { // counted before the round that gives back returns
		return
	}
	c.givingBackMu.Lock()
	g := c.givingBack[name]
	c.givingBackMu.Unlock()
	if g == nil {
		return
	}
	t := time.NewTimer(10 * c.cfg.MasterTimeout)
	defer t.Stop()
	select {
	case <-g.done:
	case <-ctx.Done():
	case <-t.C:
	}
}

// Release drops holder's hold of name on every connected master and wakes
// waiters anywhere. A release must not be dropped: a key left behind blocks
// the name for a whole lease. So each master's release has a long deadline
// and goes on in the background past the return, and it goes to masters
// marked down too, to land when they answer again. The caller waits only
// until a majority answered (or every master it sent to), or the round no
// longer waits for its silent masters (see Patience): a hung master costs a
// release nothing when a majority answers. It
// returns how many of the masters that answered held it; errors only when
// none answered.
func (c *Cluster) Release(ctx context.Context, name, holder string) (int, error) {
	return c.release(ctx, name, holder, name)
}

// HandOver is Release by an agent that held name for a run of its local
// holders while another agent waited (see Wanted), and now stands back:
// its message wakes other agents' waiters as a recheck (Watch.Recheck), so
// that an attempt that fails says nothing about contention and costs no
// back-off, and this agent's own waiters not at all.
func (c *Cluster) HandOver(ctx context.Context, name, holder string) (int, error) {
	return c.release(ctx, name, holder, c.handover)
}

func (c *Cluster) release(ctx context.Context, name, holder, message string) (int, error) {
	keys, args := c.releaseArgs(name, holder, message)
	held := 0
	r, _ := c.vote(ctx, roundSpec{op: OpRelease, script: scripts.Release, keys: keys, args: args, land: true,
		judge: func(a answer) (int, bool, error) {
			v, err := a.res.AsInt64()
			held += int(v)
			return 0, err == nil, err
		}})
	if r.yes() == 0 {
		return 0, &RoundError{Kind: ErrNoQuorum, Needed: c.quorum, Masters: r.errs}
	}
	return held, nil
}

// everywhere runs a script that must not be dropped (a write-back, a
// removal) as a round that lands (see roundSpec.land), as Release does,
// and returns how many masters answered without error in time.
func (c *Cluster) everywhere(ctx context.Context, op Op, s *scripts.Script, keys, args []string) int {
	r, _ := c.vote(ctx, roundSpec{op: op, script: s, keys: keys, args: args, land: true})
	return r.yes()
}

// releaseChunk is how many releases ReleaseMany pipelines to a master at once.
const releaseChunk = 1024

// ReleaseMany releases many holds at once, as a closing session or a
// stopping agent does: on every connected master (down ones too: see
// Release), in pipelined chunks on the bulk connection, with no goroutine
// per hold. It returns when every master answered or its deadline passed
// (max(20×MasterTimeout, 1s), plus 10µs per hold); a release that did not
// land leaves its lease to expire.
func (c *Cluster) ReleaseMany(ctx context.Context, holds []RenewKey) {
	if len(holds) == 0 {
		return
	}
	calls := make([]call, len(holds))
	for i, h := range holds {
		keys, args := c.releaseArgs(h.Name, h.Holder, h.Name)
		calls[i] = call{keys: keys, args: args}
	}
	opCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx),
		max(20*c.cfg.MasterTimeout, time.Second)+time.Duration(len(holds))*10*time.Microsecond)
	defer cancel()
	var wg sync.WaitGroup
	for _, m := range c.masters {
		if m.conn(laneBulk) == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for lo := 0; lo < len(calls) && opCtx.Err() == nil; lo += releaseChunk {
				m.evalMulti(opCtx, scripts.Release, calls[lo:min(lo+releaseChunk, len(calls))])
			}
		}()
	}
	wg.Wait()
}

// RenewKey names one hold to renew, with what to re-create where it is missing.
type RenewKey struct {
	Name, Holder string
	// Entry marks a queue entry's heartbeat: Holder is then the entry's
	// Member, and Record is zero.
	Entry bool
	// Waiting marks this agent's waiting record of Name (see waiters.go):
	// Holder is then the agent's instance, and Record is zero.
	Waiting bool
	Record  Record        // the Grant's; a zero Record is never re-created
	Lease   time.Duration // the lease to set; 0: Renew's lease
	// Tail says the hold was granted with a Tail: its renewal keeps it
	// (see scripts/lua/tails.lua).
	Tail bool
	// Prepared is this key's renewal ready to send. Renew fills it in
	// where it is not (see Prepared): a caller that keeps it with its hold
	// and hands it back makes each renewal build nothing per hold.
	Prepared Prepared
}

// Prepared is a hold's renewal made ready to send once: the renew
// script's key for it, as the Cluster that renews it spells it, its lease
// and kind, and the hash slot of its keys. Cluster.Renew fills it in the
// RenewKey it is handed where it is zero, or was made by another Cluster,
// for another lease or another kind of key, and sends it as it is from
// then on. It stays right while the key's Name does: a caller that renames
// a key must zero it. The Record is not in it: only a repair, which is
// rare, sends the record, and builds its call then. It is kept with each
// of 100,000 holds, so it keeps only what a renewal would build per hold:
// the lease argument is made once per renewal for every hold of a lease,
// and an entry's or a waiting record's two keys (they are few) per round.
type Prepared struct {
	by *Cluster
	// set is the hold's set key (the script makes the holder key), ""
	// for an entry or a waiting record.
	set   string
	lease time.Duration
	slot  uint16 // the hash slot of its keys (they share the name's hash tag)
	kind  renewKind
}

// renewKind is what a RenewKey renews, as the renew script tells them
// apart by the lease argument's prefix.
type renewKind uint8

const (
	renewPlain renewKind = iota + 1
	renewTail
	renewEntry
	renewWaiting
)

func (k *RenewKey) kind() renewKind {
	switch {
	case k.Entry:
		return renewEntry
	case k.Waiting:
		return renewWaiting
	case k.Tail:
		return renewTail
	}
	return renewPlain
}

// leaseArgs are one lease's renew arguments ("15000", "t15000",
// "q15000", "w15000"), one per renewKind, made once per Renew for every
// hold of that lease: most holds share one.
type leaseArgs struct {
	lease time.Duration
	args  [renewWaiting + 1]string
}

func (a *leaseArgs) arg(lease time.Duration, kind renewKind) string {
	if a.args[renewPlain] == "" || a.lease != lease {
		ms := strconv.FormatInt(lease.Milliseconds(), 10)
		a.lease = lease
		a.args = [...]string{renewPlain: ms, renewTail: "t" + ms, renewEntry: "q" + ms, renewWaiting: "w" + ms}
	}
	return a.args[kind]
}

// prepare makes k.Prepared ready for lease (k's own, if it has one),
// unless it is: see Prepared.
func (c *Cluster) prepare(k *RenewKey, lease time.Duration) {
	if k.Lease > 0 {
		lease = k.Lease
	}
	kind, p := k.kind(), &k.Prepared
	if p.by == c && p.lease == lease && p.kind == kind {
		return
	}
	*p = Prepared{by: c, lease: lease, kind: kind}
	if kind == renewEntry || kind == renewWaiting {
		p.slot = uint16(hashslot.Of(c.keys.Set(k.Name)))
		return
	}
	p.set = c.keys.Set(k.Name)
	p.slot = uint16(hashslot.Of(p.set))
}

// appendScriptKeys appends the renew script's keys of k, prepared.
func (c *Cluster) appendScriptKeys(keys []string, k *RenewKey) []string {
	switch k.Prepared.kind {
	case renewEntry:
		return append(keys, c.keys.Queue(k.Name), c.keys.Deadlines(k.Name))
	case renewWaiting:
		return append(keys, c.keys.WaitingDeadlines(k.Name), c.keys.Waiting(k.Name))
	}
	return append(keys, k.Prepared.set)
}

// RenewResult counts the voting masters that renewed a hold (OK), that
// answered it is no longer there (Gone), and, of those, where a renewal
// that kept a majority re-created it (Repaired).
type RenewResult struct {
	OK, Gone, Repaired int
}

// Downgrade makes holder's exclusive hold of name shared on a majority, and
// wakes the name's waiters anywhere. Until it succeeds the hold stays
// exclusive: more than it needs, never less.
func (c *Cluster) Downgrade(ctx context.Context, name, holder string) error {
	r, never := c.vote(ctx, roundSpec{op: OpDowngrade, script: scripts.Downgrade, keys: []string{c.keys.Holder(name, holder)}, args: []string{c.keys.Channel(name), name},
		judge: func(a answer) (int, bool, error) {
			v, err := a.res.AsInt64()
			return 0, err == nil && v == 1, err
		}})
	if err := c.majorityErr(r, never); err != nil {
		return err
	}
	return nil
}

// renewArgs are the renew script's keys and arguments for holds, each with
// its own lease (lease where it has none), as one call: see renewCalls.
func (c *Cluster) renewArgs(lease time.Duration, holds []RenewKey) (keys, args []string) {
	holds = slices.Clone(holds) // prepared here, not in the caller's keys
	for i := range holds {
		c.prepare(&holds[i], lease)
	}
	return c.appendRenewCall(nil, nil, holds, nil, new(leaseArgs))
}

// appendRenewCall appends to keys and args the renew script's keys and
// arguments for the prepared holds of order (all of holds if order is nil).
func (c *Cluster) appendRenewCall(keys, args []string, holds []RenewKey, order []int, la *leaseArgs) ([]string, []string) {
	keys = append(keys, c.keys.Marker())
	args = append(args, c.gateArgs()...)
	add := func(h *RenewKey) {
		keys = c.appendScriptKeys(keys, h)
		args = append(args, h.Holder, la.arg(h.Prepared.lease, h.Prepared.kind))
	}
	if order == nil {
		for i := range holds {
			add(&holds[i])
		}
	}
	for _, i := range order {
		add(&holds[i])
	}
	return keys, args
}

// renewReply reads master i's answer to a renew script call: one 1 (renewed)
// or 0 (gone) per hold.
func (c *Cluster) renewReply(i int, res rueidis.RedisResult, n int) ([]int64, error) {
	vals, err := res.AsIntSlice()
	switch {
	case err != nil:
		return nil, err
	case c.quarantineLeft(i, vals) != nil:
		return nil, ErrQuarantined
	case len(vals) != n+1 || vals[0] != 0:
		return nil, errors.New("unexpected renew reply")
	}
	return vals[1:], nil
}

// renewBatch is how many holds one renew script call carries, and
// renewChunk how many such calls go to a master at once: a chunk at a time,
// so that a large renewal does not fill the connection's buffers at once.
const (
	renewBatch = 256
	renewChunk = 16
)

// renewChunkEnd is where the chunk of calls that starts at first ends: as
// many calls as carry renewChunk full calls' holds. A standalone master's
// calls are full but the last, so a chunk is renewChunk calls; a cluster
// master's are cut per slot, often one hold each, and a chunk of
// renewChunk of those would make thousands of names thousands of round
// trips, more than a quarter lease holds on a busy host.
func renewChunkEnd(holds [][]int, first int) int {
	carried := 0
	for last := first; last < len(holds); last++ {
		carried += len(holds[last])
		if carried > renewChunk*renewBatch {
			return last
		}
	}
	return len(holds)
}

// Renew sets the lease of every hold in keys on every voting master, in
// pipelined chunks of script calls of renewBatch holds each, and counts the
// answers per hold. Then it repairs: a hold that a majority renewed but
// some voting master lacks (that master was down at the grant, or let the
// key expire while paused) is re-created there, so that it regains its
// full redundancy before the next fault.
func (c *Cluster) Renew(ctx context.Context, lease time.Duration, keys []RenewKey) []RenewResult {
	out := make([]RenewResult, len(keys))
	if len(keys) == 0 {
		return out
	}
	// A standalone master's calls are full batches; a cluster master's
	// are cut per slot (see renewCalls), made only when one is a cluster.
	var cuts [2]*renewCut
	cuts[0] = c.renewCalls(lease, keys, false)
	defer cuts[0].free()
	if c.clustered {
		cuts[1] = c.renewCalls(lease, keys, true)
		defer cuts[1].free()
	}
	to, _ := c.voters()
	gone := make([][]int, len(c.masters)) // per master, the holds it lacks
	// A round may take up to a quarter lease: validity counts from before
	// it began, so a slow round is safe, and cutting a busy master's
	// renewal short would lose holds that it was about to keep.
	roundEnd := time.Now().Add(max(c.cfg.MasterTimeout, lease/4)) // the round's budget: not lease logic (validity counts from before it)
	roundCtx, cancelRound := context.WithDeadline(ctx, roundEnd)
	defer cancelRound()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, i := range to {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cut := cuts[0]
			if c.masters[i].t.perSlot() {
				cut = cuts[1]
			}
			calls, holds := cut.calls, cut.holds
			for first, last := 0, 0; first < len(calls) && roundCtx.Err() == nil; first = last {
				last = renewChunkEnd(holds, first)
				chunk := calls[first:last]
				start := time.Now() // latency, not lease logic: see timedEval
				res := c.masters[i].evalMulti(roundCtx, scripts.Renew, chunk)
				c.cfg.Observer.MasterOp(i, OpRenew, time.Since(start))
				mu.Lock()
				for b, r := range res {
					idx := holds[first+b]
					vals, err := c.renewReply(i, r, len(idx))
					if err != nil {
						continue
					}
					for j, v := range vals {
						if v == 1 {
							out[idx[j]].OK++
						} else {
							out[idx[j]].Gone++
							gone[i] = append(gone[i], idx[j])
						}
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	c.repair(ctx, lease, roundEnd, keys, out, gone)
	return out
}

// renewCut is a renewal's calls, and holds[k] the indices in its keys of
// call k's holds. Its slices are reused from one renewal to the next: see free.
type renewCut struct {
	calls      []call
	holds      [][]int
	order      []int
	keys, args []string // the calls' keys and arguments, one after another
}

// renewCuts keeps renewCuts' slices between renewals: a renewal of 100,000
// holds made ~10 MB of them each tick, which the GC then took for work.
var renewCuts = sync.Pool{New: func() any { return new(renewCut) }}

// free gives cut's slices back for the next renewal; cut is not used
// after.
func (cut *renewCut) free() {
	clear(cut.calls)
	clear(cut.keys)
	clear(cut.args)
	clear(cut.holds)
	renewCuts.Put(cut)
}

// renewCalls prepares keys (see Prepared) and cuts them into the renew
// script's calls of at most renewBatch holds each, and of one hash slot
// each with perSlot, for a master that is a Redis Cluster (see shards.go).
// The cut is the caller's to free.
func (c *Cluster) renewCalls(lease time.Duration, keys []RenewKey, perSlot bool) *renewCut {
	for i := range keys {
		c.prepare(&keys[i], lease)
	}
	var la leaseArgs // most holds share a lease: its arguments are made once
	cut := renewCuts.Get().(*renewCut)
	cut.calls, cut.holds = cut.calls[:0], cut.holds[:0]
	order := cut.order[:0]
	for i := range keys {
		order = append(order, i)
	}
	if perSlot {
		slices.SortStableFunc(order, func(a, b int) int { return int(keys[a].Prepared.slot) - int(keys[b].Prepared.slot) })
	}
	cut.order = order
	// A standalone master's calls are full: two keys or arguments per hold
	// and one key and two gate arguments per call, allotted at once.
	calls := len(keys)/renewBatch + 1
	k := slices.Grow(cut.keys[:0], 2*len(keys)+calls)
	a := slices.Grow(cut.args[:0], 2*len(keys)+2*calls)
	for lo := 0; lo < len(order); {
		hi := lo + 1
		for hi < len(order) && hi-lo < renewBatch && (!perSlot || keys[order[hi]].Prepared.slot == keys[order[lo]].Prepared.slot) {
			hi++
		}
		k0, a0 := len(k), len(a)
		k, a = c.appendRenewCall(k, a, keys, order[lo:hi], &la)
		// Cut to their own length: an append to one call's keys must not
		// run into the next's (the buffers may move meanwhile: see below).
		cut.calls = append(cut.calls, call{keys: k[k0:len(k):len(k)], args: a[a0:len(a):len(a)]})
		cut.holds = append(cut.holds, order[lo:hi])
		lo = hi
	}
	cut.keys, cut.args = k, a
	return cut
}

// repairCall is the repair script's call that re-creates k's hold with
// lease ms (k's own lease if it has one).
func (c *Cluster) repairCall(ms string, k RenewKey) call {
	if k.Lease > 0 {
		ms = strconv.FormatInt(k.Lease.Milliseconds(), 10)
	}
	args := append([]string{k.Holder, ms, c.keys.HolderPrefix(k.Name)}, c.gateArgs()...)
	args = append(append(args, k.Record.fields()...), strconv.FormatInt(max(k.Record.Top, k.Record.Fence), 10))
	return call{
		keys: []string{c.keys.Set(k.Name), c.keys.Fence(k.Name), c.keys.Holder(k.Name, k.Holder), c.keys.Marker()},
		args: append(args, c.tailLeft(k.Record)...),
	}
}

// tailLeft is the repair script's tail arguments for r: its delay, and
// what is left of its min_hold, in ms.
func (c *Cluster) tailLeft(r Record) []string {
	left := Tail{Delay: r.Tail.Delay}
	if !r.MinUntil.IsZero() {
		left.MinHold = max(r.MinUntil.Sub(c.clock.Now()), 0)
	}
	return left.args()
}

// repair re-creates, on each master, the holds of gone that a majority
// renewed. It may use what is left of the renewal round's budget (until
// roundEnd), and master_timeout at least: a master that answered the round
// late answers its repair late too, and one just restarted on a loaded
// host answers it slower than the round (its scripts are loaded again),
// so cut at master_timeout alone, the repair left it without its holds for
// seconds. A round and its repairs so take at most what they did before,
// a quarter lease and master_timeout: the rounds of a renewal of many
// holds run one after another.
func (c *Cluster) repair(ctx context.Context, lease time.Duration, roundEnd time.Time, keys []RenewKey, out []RenewResult, gone [][]int) {
	ms := strconv.FormatInt(lease.Milliseconds(), 10)
	end := time.Now().Add(c.cfg.MasterTimeout)
	if roundEnd.After(end) {
		end = roundEnd
	}
	opCtx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i, holds := range gone {
		var idx []int
		var calls []call
		for _, h := range holds {
			k := keys[h]
			if out[h].OK < c.quorum || k.Record.Fence == 0 {
				continue
			}
			idx = append(idx, h)
			calls = append(calls, c.repairCall(ms, k))
		}
		if len(calls) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := c.masters[i].evalMulti(opCtx, scripts.Repair, calls)
			mu.Lock()
			defer mu.Unlock()
			for j, r := range res {
				if v, err := r.AsInt64(); err == nil && v == 2 {
					out[idx[j]].Repaired++
				}
			}
		}()
	}
	wg.Wait()
	for i, r := range out {
		if r.Repaired > 0 {
			c.cfg.Logger.Debug("hold re-created on masters that lacked it", "name", keys[i].Name, "masters", r.Repaired)
		}
	}
}

// Tail is what keeps a name unavailable after its hold ended (see
// scripts/lua/tails.lua). The zero Tail is none: such a hold costs nothing more.
type Tail struct {
	// Delay is how long the name stays unavailable to everyone after the
	// hold ends uncleanly (delay=): its agent died, its session closed
	// without UNLOCK, it was lost or revoked.
	Delay time.Duration
	// MinHold is how long after the grant the name stays unavailable,
	// however the hold ends (min_hold=).
	MinHold time.Duration
}

// Any says whether t keeps the name after the hold at all.
func (t Tail) Any() bool { return t.Delay > 0 || t.MinHold > 0 }

func (t Tail) args() []string {
	return []string{strconv.FormatInt(t.Delay.Milliseconds(), 10), strconv.FormatInt(t.MinHold.Milliseconds(), 10)}
}

// End ends holder's hold of name, which has a Tail, on every connected
// master, as Release does one without: the name then stays unavailable
// for what is left of its min_hold, or its delay if clean is false
// (whichever is longer). It says whether a majority keeps a tail.
func (c *Cluster) End(ctx context.Context, name, holder string, clean bool) (bool, error) {
	keys, args := c.releaseArgs(name, holder, name)
	keys = append(keys, c.keys.Marker())
	args = append(args, "0")
	if clean {
		args[len(args)-1] = "1"
	}
	tails := 0
	r, _ := c.vote(ctx, roundSpec{op: OpRelease, script: scripts.End, keys: keys, args: args, land: true,
		judge: func(a answer) (int, bool, error) {
			v, err := a.res.AsInt64()
			if v == 2 {
				tails++
			}
			return 0, err == nil, err
		}})
	if r.yes() == 0 {
		return false, &RoundError{Kind: ErrNoQuorum, Needed: c.quorum, Masters: r.errs}
	}
	return tails >= c.quorum, nil
}

// DelayedUntil returns when the tail of name ends (see scripts/lua/tails.lua) as a
// majority of the voting masters have it, in Unix ms of their clocks, or 0
// while no majority has one; with masters that did not answer, the latest
// end that the answers do not rule out as a majority's (see rules.ReadQuorum).
func (c *Cluster) DelayedUntil(ctx context.Context, name string) (int64, error) {
	var ends []int64
	r, never := c.vote(ctx, roundSpec{op: OpWho, script: scripts.Delayed, keys: []string{c.keys.Set(name)}, args: []string{c.keys.HolderPrefix(name)}, whole: true,
		judge: func(a answer) (int, bool, error) {
			v, err := a.res.AsInt64()
			if err == nil {
				ends = append(ends, v)
			}
			return 0, err == nil, err
		}})
	if err := c.majorityErr(r, never); err != nil {
		return 0, err
	}
	slices.Sort(ends)
	return ends[len(ends)-rules.ReadQuorum(c.quorum, len(c.masters)-len(ends))], nil // the latest end a majority may have
}

// revokePrefix starts a revocation's message on the revocations channel:
// "revoke HOLDER REASON".
const revokePrefix = "revoke "

// WatchRevocations subscribes to revocations, which Config.OnRevoke hears,
// until the watch is closed.
func (c *Cluster) WatchRevocations(ctx context.Context) *Watch {
	return c.watchChannel(ctx, c.keys.Revocations())
}

// onRevoke hands a revocation's message to Config.OnRevoke.
func (c *Cluster) onRevoke(message string) {
	if holder, reason, ok := parseRevocation(message); ok && c.cfg.OnRevoke != nil {
		c.cfg.OnRevoke(holder, reason)
	}
}

// revocation is the message of the revocation of holder's hold for reason.
func revocation(holder, reason string) string { return revokePrefix + holder + " " + reason }

// parseRevocation reads a revocation's message. The reason is the last
// word and the holder id all before it: quorum does not rule out a space
// in a holder id (the agent's ids have none: agent.id may not).
func parseRevocation(message string) (holder, reason string, ok bool) {
	rest, ok := strings.CutPrefix(message, revokePrefix)
	i := strings.LastIndexByte(rest, ' ')
	if !ok || i <= 0 || i == len(rest)-1 {
		return "", "", false
	}
	return rest[:i], rest[i+1:], true
}

// Revoke revokes the holds of name (those of agent, if not ""): on a
// majority each becomes unrenewable while it still blocks the name (see
// scripts/lua/revoke.lua), its agent is told on the revocations channel, and Revoke
// waits, until ctx ends, for each to be ended on a majority (its agent
// released it, or it expired: a revoked record cannot outlive its lease).
// It returns how many holds a majority revoked. ErrNoQuorum when no
// majority answered; ctx's error when one was not ended in time.
func (c *Cluster) Revoke(ctx context.Context, name, agent, reason string) (int, error) {
	holders, err := c.revokeRound(ctx, name, agent)
	if err != nil || len(holders) == 0 {
		return 0, err
	}
	watch := c.Watch(ctx, name) // the agents' ends publish on it
	defer watch.Close()
	c.eachMaster(ctx, func(ctx context.Context, m *master) {
		for _, h := range holders {
			m.publish(ctx, c.keys.Revocations(), revocation(h, reason))
		}
	})
	for {
		live, err := c.revokedLive(ctx, name, holders)
		if err == nil && live == 0 {
			return len(holders), nil
		}
		t := c.clock.NewTimer(revokePoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return len(holders), ctx.Err()
		case <-watch.C():
		case <-t.C():
		}
		t.Stop()
	}
}

// revokePoll is how often Revoke looks whether revoked holds ended when no
// message says so: a record whose agent does not answer expires silently.
const revokePoll = 100 * time.Millisecond

// revokeRound runs scripts/lua/revoke.lua on the masters and returns the holders that a
// majority revoked.
func (c *Cluster) revokeRound(ctx context.Context, name, agent string) ([]string, error) {
	counts := map[string]int{}
	var order []string
	r, never := c.vote(ctx, roundSpec{op: OpRelease, script: scripts.Revoke, keys: []string{c.keys.Set(name)},
		args: []string{c.keys.HolderPrefix(name), agent, strconv.FormatInt(c.cfg.Tombstone.Milliseconds(), 10)}, whole: true,
		judge: func(a answer) (int, bool, error) {
			vals, err := a.res.AsStrSlice()
			for _, h := range vals {
				if counts[h]++; counts[h] == 1 {
					order = append(order, h)
				}
			}
			return 0, err == nil, err
		}})
	if err := c.majorityErr(r, never); err != nil {
		return nil, err
	}
	return slices.DeleteFunc(order, func(h string) bool { return counts[h] < c.quorum }), nil
}

// revokedLive counts the holders whose revoked record a majority of the
// voting masters do not yet know ended.
func (c *Cluster) revokedLive(ctx context.Context, name string, holders []string) (int, error) {
	keys := make([]string, len(holders))
	for i, h := range holders {
		keys[i] = c.keys.Revoked(name, h)
	}
	ended := make([]int, len(holders))
	r, never := c.vote(ctx, roundSpec{op: OpWho, script: scripts.RevokedLive, keys: keys, whole: true,
		judge: func(a answer) (int, bool, error) {
			vals, err := a.res.AsIntSlice()
			if err == nil && len(vals) != len(holders) {
				err = errors.New("unexpected reply")
			}
			for i, v := range vals {
				if err == nil && v == 0 {
					ended[i]++
				}
			}
			return 0, err == nil, err
		}})
	if err := c.majorityErr(r, never); err != nil {
		return 0, err
	}
	live := 0
	for _, n := range ended {
		if n < c.quorum {
			live++
		}
	}
	return live, nil
}
