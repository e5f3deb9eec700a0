// Package renewal is the watchdog: it renews every hold of the agent each
// lease/3, in one pipelined round per master per tick, and declares a hold
// lost just before its validity runs out without a successful renewal, so
// the client hears of it before any other client could be granted the name.
// A ttl= hold is renewed like any other until its end, where it is ended:
// no record on a master outlives one lease without a renewal, which is what
// lets a master that lost its data sit out one lease (see agent.Quarantine).
package renewal

import (
	"container/heap"
	"context"
	"strconv"
	"time"

	"github.com/lock-agent/lock-agent/internal/lockorder"
	"github.com/lock-agent/lock-agent/quorum/rules"

	"github.com/hashicorp/go-hclog"
	"github.com/lock-agent/lock-agent/quorum"
	"github.com/lock-agent/lock-agent/quorum/clock"
)

// Reason says why a hold ended without its client asking.
type Reason string

// The reasons of a LOST push.
const (
	ReasonQuorum  Reason = "quorum"  // renewal could not keep a majority before validity ran out
	ReasonExpired Reason = "expired" // a ttl= hold reached its end
	ReasonRevoked Reason = "revoked" // a majority of masters no longer have the hold
	// ReasonShutdown: the agent is stopping. The agent says it, never the
	// watchdog.
	ReasonShutdown Reason = "shutdown"
)

// Loss is why a hold ended without its client asking: its Reason, and for
// a revocation the operator's word. A client hears both in LOST (reason=,
// why=).
type Loss struct {
	Reason Reason
	// Why is the operator's word of a revocation (REVOKE reason=W), or ""
	// if it gave none or said ReasonRevoked itself; "" for every other
	// Reason. See Revocation.
	Why string
}

// Revocation is the loss of a hold revoked for why, the operator's word
// ("" or ReasonRevoked: none). Its Reason is always ReasonRevoked: a
// client must never take a revocation for another kind of loss, whatever
// the word.
func Revocation(why string) Loss {
	if why == string(ReasonRevoked) {
		why = ""
	}
	return Loss{Reason: ReasonRevoked, Why: why}
}

// Revoked says the hold was revoked: a majority can no longer renew it.
func (l Loss) Revoked() bool { return l.Reason == ReasonRevoked }

// Renewer renews a batch of holds; *quorum.Cluster is one.
type Renewer interface {
	Renew(ctx context.Context, lease time.Duration, keys []quorum.RenewKey) []quorum.RenewResult
}

// Kind says what a Hold is a record of, and so how it is renewed and
// what its loss means to its owner.
type Kind uint8

// The kinds of a Hold.
const (
	// KindHold is a client's hold of Name (the zero Kind): Holder is its
	// holder id. A ttl= hold is one: see Hold.End.
	KindHold Kind = iota
	// KindFixed is a hold that is never renewed: it ends at the deadline
	// Add gave it, with ReasonExpired (the agent's health probe is one).
	KindFixed
	// KindEntry is a waiter's queue entry (quorum.Entry): Holder is the
	// entry's Member, and renewing it is its heartbeat
	// (quorum.RenewKey.Entry). It is lost like a hold, and its waiter then
	// needs a new place.
	KindEntry
	// KindWaiting is the agent's waiting record of Name
	// (quorum.RenewKey.Waiting): Holder is the agent's instance. It is
	// lost like a hold, and the agent then writes it anew.
	KindWaiting
)

// String names the kind, as logs and tests print it.
func (k Kind) String() string {
	switch k {
	case KindHold:
		return "hold"
	case KindFixed:
		return "fixed"
	case KindEntry:
		return "entry"
	case KindWaiting:
		return "waiting"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Hold is one hold the watchdog watches. Its fields are set before Add and
// not changed after, but by the watchdog's own methods (SetEnd, SetRecord,
// UpdateRecord), and Owner.
type Hold struct {
	Name, Holder string
	// Owner is the caller's record of the hold, handed back with it to
	// OnLost, so that a loss reaches its owner without a lookup. The
	// watchdog never reads or writes it: a caller that changes it after
	// Add guards it with a lock of its own.
	Owner any
	// Kind is what the hold is a record of: a client's hold (the zero
	// Kind), a waiter's queue entry, the agent's waiting record, or a
	// hold that is never renewed (KindFixed).
	Kind Kind
	// Tail says its records keep a tail after it (quorum.Tail): they are
	// renewed so (quorum.RenewKey.Tail). Only a KindHold has a tail.
	Tail bool
	// Lease is the lease its records are renewed with; 0 is Config.Lease.
	// It sets the hold's lead (see lead).
	Lease time.Duration
	// Record is the grant's (quorum.Grant): a renewal re-creates the hold
	// with it on a master that lacks it. Guarded by Watchdog.mu once added.
	Record quorum.Record
	// End, if not zero, is the end of a ttl= hold: it is renewed like any
	// other hold until then, and at End exactly (its client was told that
	// its validity ends there) it is lost with ReasonExpired, unless it was
	// lost for want of renewals before. Zero: no end. Set before Add, then
	// by SetEnd; guarded by Watchdog.mu once added.
	End time.Time

	// deadline is how long a majority is known to keep its records: the
	// last renewal's start + lease − drift. Guarded by Watchdog.mu.
	deadline time.Time
	expiry   time.Time // when it is declared lost: see rearm; guarded by Watchdog.mu
	index    int       // in Watchdog.byExpiry; guarded by Watchdog.mu
	// prev and next place it in Watchdog.order, and queued says when it
	// was put there (see renewOrder); guarded by Watchdog.mu.
	prev, next *Hold
	queued     uint64
	// prepared is its renewal as the Renewer made it ready to send (see
	// quorum.Prepared), handed back each round: its keys and arguments are
	// built once, not per tick. Guarded by Watchdog.mu.
	prepared quorum.Prepared
	// loss is why the watchdog stopped watching it (zero: it did not find
	// it lost, nor was it revoked): see Lost. Guarded by Watchdog.mu.
	loss Loss
}

// byExpiry is the watched holds as a min-heap on expiry, so that the next
// expiry is found in O(1) and kept in O(log n) per change: a scan of every
// hold per change made a burst of grants quadratic. An entry's key may be
// earlier than its hold's expiry, never later: a renewal moves expiries
// later without placing each hold anew, and refresh places them all at
// once when the renewal ends (see apply); expire places anew a hold whose
// key came before its expiry.
type byExpiry []expiryEntry

// expiryEntry is a hold in byExpiry, under key: its expiry in Unix ns,
// as it stood when it was last placed.
type expiryEntry struct {
	key int64
	h   *Hold
}

func (b byExpiry) Len() int           { return len(b) }
func (b byExpiry) Less(i, j int) bool { return b[i].key < b[j].key }
func (b byExpiry) Swap(i, j int) {
	b[i], b[j] = b[j], b[i]
	b[i].h.index, b[j].h.index = i, j
}
func (b *byExpiry) Push(x any) {
	e := x.(expiryEntry)
	e.h.index = len(*b)
	*b = append(*b, e)
}
func (b *byExpiry) Pop() any {
	old := *b
	e := old[len(old)-1]
	old[len(old)-1] = expiryEntry{}
	*b = old[:len(old)-1]
	return e
}

// setDeadline moves h's deadline (and so its expiry). w.mu is held.
func (w *Watchdog) setDeadline(h *Hold, deadline time.Time) {
	h.deadline = deadline
	w.rearm(h)
}

// rearm sets h's expiry (see setExpiry) and places h under it in
// byExpiry, if it is watched. w.mu is held.
func (w *Watchdog) rearm(h *Hold) {
	w.setExpiry(h)
	if w.watched(h) {
		w.byExpiry[h.index].key = h.expiry.UnixNano()
		heap.Fix(&w.byExpiry, h.index)
	}
}

// setExpiry sets h's expiry, when it is declared lost: a lead before its
// deadline, so that its client hears of it while it still holds; or its
// End if that comes first (the hold is still held on the masters then,
// and the agent gives it back only after the LOST). w.mu is held.
func (w *Watchdog) setExpiry(h *Hold) {
	h.expiry = h.deadline.Add(-w.lead(h))
	if w.endsFirst(h) {
		h.expiry = h.End
	}
}

// refresh places every hold in byExpiry under its expiry, in O(n): after
// a renewal moved most of them later, where placing each anew as it moved
// cost O(log n) cache misses per hold (~45 ms per tick at 100,000 holds).
// w.mu is held.
func (w *Watchdog) refresh() {
	for i := range w.byExpiry {
		w.byExpiry[i].key = w.byExpiry[i].h.expiry.UnixNano()
	}
	heap.Init(&w.byExpiry)
}

// endsFirst says whether h, as things stand, reaches its End before it
// would be lost for want of renewals. w.mu is held.
func (w *Watchdog) endsFirst(h *Hold) bool {
	return !h.End.IsZero() && !h.End.After(h.deadline.Add(-w.lead(h)))
}

// validUntil is when h stops being valid: its deadline, or its End if
// that comes first. w.mu is held.
func (w *Watchdog) validUntil(h *Hold) time.Time {
	if !h.End.IsZero() && h.End.Before(h.deadline) {
		return h.End
	}
	return h.deadline
}

// lead is how long before its deadline h is declared lost.
func (w *Watchdog) lead(h *Hold) time.Duration {
	lease := h.Lease
	if lease <= 0 {
		lease = w.cfg.Lease
	}
	return max(w.cfg.MinLead, lease/50)
}

// Config configures a Watchdog.
type Config struct {
	Lease       time.Duration
	DriftFactor float64
	Masters     int // how many masters there are
	// A hold that was not renewed is declared lost max(MinLead, its
	// lease/50) before its validity ends, so that the LOST push reaches the
	// client while the hold is still valid (a ttl= hold that reaches its
	// End first is lost at its End). Default 10ms.
	MinLead time.Duration
	Renewer Renewer
	// OnLost is called, from the watchdog's goroutine and without locks held,
	// once for each hold that ends without being removed or revoked by
	// Revoke, with its loss: the one Lost says. It must not block. The
	// hold is no longer watched when it is called: Remove returns false for
	// it from then on. Its Owner tells the caller whose it was.
	OnLost func(*Hold, Loss)
	Clock  clock.Clock // default clock.Real
	Logger hclog.Logger
}

// Watchdog renews holds and reports the ones it loses.
type Watchdog struct {
	cfg    Config
	quorum int
	// mu guards the watched holds. Nothing of the caller's runs under it
	// (OnLost and the Renewer are called without it), so a caller may call
	// the watchdog with its own locks held.
	mu       lockorder.Mutex[lockorder.Watchdog]
	byExpiry byExpiry // the watched holds (see watched)
	// order is the watched holds that are renewed (all but KindFixed),
	// the least recently renewed first: see renewable. Guarded by mu.
	order renewOrder
	// rounds counts the renewal rounds begun (see renewKeys): a hold is
	// queued in order under it. Guarded by mu.
	rounds uint64
	// stale says a renewal moved expiries later without placing their
	// holds anew in byExpiry (see refresh). Guarded by mu.
	stale   bool
	changed chan struct{}
	// due is renew's list of the holds of its renewal, kept from one to
	// the next (renewals do not overlap: see Run).
	due []*Hold
}

// renewOrder is a list of holds, the least recently renewed first, linked
// through the holds themselves, so a renewal takes them in order with no
// sort. Its holds are in the order of their queued: the rounds begun when
// a hold was added (pushBack), or, for a hold a round renewed, that
// round's number less one (see requeue). A round's holds count their
// validity from its start, so they go before the holds added after it
// began (which expire later) and after those added before.
type renewOrder struct{ front, back *Hold }

func (o *renewOrder) pushBack(h *Hold, queued uint64) {
	h.queued = queued
	o.insertAfter(o.back, h, h)
}

// insertAfter links the chain first..last (linked by next) after at, or
// at the front if at is nil.
func (o *renewOrder) insertAfter(at, first, last *Hold) {
	first.prev = at
	if at != nil {
		last.next, at.next = at.next, first
	} else {
		last.next, o.front = o.front, first
	}
	if last.next != nil {
		last.next.prev = last
	} else {
		o.back = last
	}
}

func (o *renewOrder) remove(h *Hold) {
	if h.prev != nil {
		h.prev.next = h.next
	} else {
		o.front = h.next
	}
	if h.next != nil {
		h.next.prev = h.prev
	} else {
		o.back = h.prev
	}
	h.prev, h.next = nil, nil
}

// requeue puts the chain first..last, holds that round renewed, which are
// not in o, after every hold queued before round began and before every
// hold queued since: the holds added since it began, as few as a round's
// time brings, are all that is walked.
func (o *renewOrder) requeue(first, last *Hold, round uint64) {
	at := o.back
	for at != nil && at.queued >= round {
		at = at.prev
	}
	for h := first; h != nil; h = h.next {
		h.queued = round - 1
	}
	o.insertAfter(at, first, last)
}

// New returns a Watchdog; Run makes it work.
func New(cfg Config) *Watchdog {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.MinLead <= 0 {
		cfg.MinLead = 10 * time.Millisecond
	}
	return &Watchdog{cfg: cfg, quorum: rules.Majority(cfg.Masters), changed: make(chan struct{}, 1)}
}

// Interval is how often watchdog holds are renewed: lease/3.
func (w *Watchdog) Interval() time.Duration { return w.cfg.Lease / 3 }

// Add starts watching h, valid until deadline.
func (w *Watchdog) Add(h *Hold, deadline time.Time) {
	w.mu.Lock()
	h.loss = Loss{}
	w.setDeadline(h, deadline)
	if !w.watched(h) {
		// A renewal made ready for what h was before it was removed
		// (quorum.Prepared keeps no name to check) is not trusted.
		h.prepared = quorum.Prepared{}
		heap.Push(&w.byExpiry, expiryEntry{h.expiry.UnixNano(), h})
		if h.Kind != KindFixed {
			w.order.pushBack(h, w.rounds)
		}
	}
	w.mu.Unlock()
	w.poke()
}

// Remove stops watching h. It returns false if h was not being watched
// (it was lost, or already removed): then the caller must not report it again.
func (w *Watchdog) Remove(h *Hold) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	ok := w.watched(h)
	if ok {
		w.drop(h)
	}
	return ok
}

// Revoke stops watching h, which was revoked for why (the operator's
// word, or "": see Revocation): Lost says so from now, and OnLost is not
// called. It returns false if h was not being watched.
func (w *Watchdog) Revoke(h *Hold, why string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	ok := w.watched(h)
	if ok {
		w.drop(h)
		h.loss = Revocation(why)
	}
	return ok
}

// Lost says whether the watchdog found h lost or h was revoked (lost), and
// why: from then, before OnLost reaches its caller, another caller may act
// on the loss itself (the agent tells the client LOST before it answers a
// request that depends on it).
func (w *Watchdog) Lost(h *Hold) (loss Loss, lost bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.watched(h) || h.loss == (Loss{}) {
		return Loss{}, false
	}
	return h.loss, true
}

// watched says whether h is watched: it is where its index says in the
// heap. (A hold's index is 0 before it is added, and left stale when it
// is dropped: either may point at another hold, never at h.) w.mu is held.
func (w *Watchdog) watched(h *Hold) bool {
	return h.index >= 0 && h.index < len(w.byExpiry) && w.byExpiry[h.index].h == h
}

// drop stops watching h, which is watched. w.mu is held.
func (w *Watchdog) drop(h *Hold) {
	heap.Remove(&w.byExpiry, h.index)
	if h.Kind != KindFixed {
		w.order.remove(h)
	}
}

// SetEnd makes end the End of h (see Hold.End): an EXTEND moved it, or a
// multi-lock's ttl= set it once every name was held. It returns how long h
// is valid from now on, or false if h is no longer watched.
func (w *Watchdog) SetEnd(h *Hold, end time.Time) (time.Duration, bool) {
	w.mu.Lock()
	ok := w.watched(h)
	var validity time.Duration
	if ok {
		h.End = end
		w.rearm(h)
		validity = w.validUntil(h).Sub(w.cfg.Clock.Now())
	}
	w.mu.Unlock()
	w.poke()
	return validity, ok
}

// SetRecord makes r the record a renewal re-creates h with where a master
// lacks it: the hold passed to another local holder, with a fence of its
// grant's block. It returns false if h is no longer watched.
func (w *Watchdog) SetRecord(h *Hold, r quorum.Record) bool {
	return w.UpdateRecord(h, func(rec *quorum.Record) { *rec = r })
}

// Validity returns how long h is still known valid (to its deadline, or
// its End if sooner), and false if h is not watched.
func (w *Watchdog) Validity(h *Hold) (time.Duration, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.watched(h) {
		return 0, false
	}
	return w.validUntil(h).Sub(w.cfg.Clock.Now()), true
}

// Deadline returns when h's validity ends, or ended: for a hold no longer
// watched (lost, or removed), when it ended then (its End, for a ttl=
// hold lost there).
func (w *Watchdog) Deadline(h *Hold) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.validUntil(h)
}

func (w *Watchdog) poke() {
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

// round is one renewal call's holds and results: a renewal of many holds
// is a series of them (see renew), the last one marked so.
type round struct {
	start  time.Time
	holds  []*Hold
	leases []time.Duration // each hold's lease as the round set it
	res    []quorum.RenewResult
	number uint64 // Watchdog.rounds when it began: see renewOrder
	last   bool   // the renewal's last round: the next may start
}

// roundSize is how many holds one Renew call carries. A renewal of every
// hold at once built a key (with its record) and the script arguments of
// every hold at once: 100,000 holds kept ~40 MB alive for the round, which
// the GC then took as the heap to double. In rounds of this size the
// renewal's own memory stays under a few MB, and each round's validity
// counts from its own start, not from the start of the whole renewal.
const roundSize = 4096

// Run renews and expires holds until ctx ends. Renewal rounds run in their
// own goroutine, so a slow master never delays the expiry of a hold.
func (w *Watchdog) Run(ctx context.Context) error {
	clock := w.cfg.Clock
	tick := clock.NewTimer(w.Interval())
	defer tick.Stop()
	expiry := clock.NewTimer(time.Hour)
	defer expiry.Stop()
	done := make(chan round, 1)
	// renewing says a renewal runs; due, that a tick came while it ran.
	renewing, due := false, false
	defer func() {
		for renewing {
			renewing = !(<-done).last
		}
	}()
	for {
		w.armExpiry(expiry)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C():
			tick.Reset(w.Interval())
			if renewing {
				due = true
				break
			}
			renewing = true
			go w.renew(ctx, done)
		case r := <-done:
			renewing = !r.last
			w.apply(r)
			// A renewal that ran past a tick is followed at once, not at
			// the tick after: that one came up to a whole lease after
			// the last renewal began, after the expiry of the holds of its
			// first rounds and of those added just after it began. A
			// renewal of 75,000 holds took 11s of a 15s lease on a
			// loaded host, and every hold was lost.
			if r.last && due && ctx.Err() == nil {
				renewing, due = true, false
				tick.Reset(w.Interval())
				go w.renew(ctx, done)
			}
		case <-expiry.C():
			w.expire()
		case <-w.changed:
		}
	}
}

func (w *Watchdog) armExpiry(t clock.Timer) {
	w.mu.Lock()
	var next time.Time
	if len(w.byExpiry) > 0 {
		next = time.Unix(0, w.byExpiry[0].key)
	}
	w.mu.Unlock()
	t.Stop()
	if next.IsZero() {
		t.Reset(time.Hour)
		return
	}
	t.Reset(max(next.Sub(w.cfg.Clock.Now()), 0))
}

// renew renews every hold watched now, roundSize holds at a time, and
// hands each round to Run; the last is marked so.
func (w *Watchdog) renew(ctx context.Context, done chan<- round) {
	w.due = w.renewable(w.due[:0])
	all := w.due
	keys := make([]quorum.RenewKey, 0, min(len(all), roundSize))
	for lo := 0; lo < len(all) && ctx.Err() == nil; lo += roundSize {
		var r round
		r.holds, r.leases, keys, r.number = w.renewKeys(all[lo:min(lo+roundSize, len(all))], keys[:0])
		r.start = w.cfg.Clock.Now()
		if len(keys) > 0 {
			r.res = w.cfg.Renewer.Renew(ctx, w.cfg.Lease, keys)
			w.keepPrepared(r.holds, keys)
		}
		done <- r
	}
	clear(keys) // the records' strings are not kept alive until the next renewal
	clear(all)  // nor the holds removed meanwhile
	done <- round{last: true}
}

// renewable appends to holds every watched hold that is renewed, the
// least recently renewed first. A round that ends before all its answers
// came (its budget is a quarter lease: see quorum.Cluster.Renew) keeps
// those it got; the holds it missed are then the first of the next round,
// where in a fixed order they would be the last again, and lost: a
// cluster master's renewal of thousands of names, on a host busy beyond
// its cores, missed the same few dozen holds at its end every round.
// (They were sorted by expiry each tick until the order was kept as it
// changes: the sort cost ~20 ms and 4 MB per tick at 100,000 holds. The
// kept order is the sort's but for holds of other leases or with an End.)
func (w *Watchdog) renewable(holds []*Hold) []*Hold {
	w.mu.Lock()
	defer w.mu.Unlock()
	for h := w.order.front; h != nil; h = h.next {
		holds = append(holds, h)
	}
	return holds
}

// renewKeys is, of holds, those still watched, their leases, and their
// renewal keys (appended to keys). It reads them under w.mu, just before
// their round: a hold removed since renew began is not renewed (its
// release may be under way), and a record may have changed (see
// UpdateRecord).
func (w *Watchdog) renewKeys(holds []*Hold, keys []quorum.RenewKey) ([]*Hold, []time.Duration, []quorum.RenewKey, uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.rounds++
	watched := make([]*Hold, 0, len(holds))
	leases := make([]time.Duration, 0, len(holds))
	for _, h := range holds {
		if !w.watched(h) {
			continue
		}
		lease := h.Lease
		if lease <= 0 {
			lease = w.cfg.Lease
		}
		watched, leases = append(watched, h), append(leases, lease)
		keys = append(keys, quorum.RenewKey{Name: h.Name, Holder: h.Holder, Entry: h.Kind == KindEntry, Waiting: h.Kind == KindWaiting,
			Record: h.Record, Lease: lease, Tail: h.Tail, Prepared: h.prepared})
	}
	return watched, leases, keys, w.rounds
}

// keepPrepared keeps with each of holds the renewal the Renewer made
// ready for it in keys (see quorum.Prepared), for the next round.
func (w *Watchdog) keepPrepared(holds []*Hold, keys []quorum.RenewKey) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, h := range holds {
		// Not one removed meanwhile; nor one added anew meanwhile as
		// another name, which is watched again (quorum.Prepared keeps no
		// name to check, but checks the lease and kind itself).
		if w.watched(h) && h.Name == keys[i].Name {
			h.prepared = keys[i].Prepared
		}
	}
}

// apply moves the deadline of every hold a majority renewed to the round's
// start + lease − drift, and drops the holds a majority no longer has.
func (w *Watchdog) apply(r round) {
	now := w.cfg.Clock.Now()
	var lost []*Hold
	var renewed, last *Hold // the chain of holds renewed, out of w.order meanwhile
	w.mu.Lock()
	for i, h := range r.holds {
		if !w.watched(h) {
			continue
		}
		deadline := r.start.Add(rules.Validity(r.leases[i], 0, w.cfg.DriftFactor))
		res := r.res[i]
		switch {
		case res.OK >= w.quorum && deadline.After(now):
			if deadline.After(h.deadline) {
				// Its expiry moves later; its place in byExpiry
				// waits for refresh, at the renewal's end.
				h.deadline = deadline
				w.setExpiry(h)
				w.stale = true
			}
			w.order.remove(h)
			if renewed == nil {
				renewed = h
			} else {
				last.next, h.prev = h, last
			}
			last = h
		case res.Gone > w.cfg.Masters-w.quorum:
			w.drop(h)
			h.loss = Revocation("")
			lost = append(lost, h)
		default:
			w.cfg.Logger.Warn("renewal missed quorum", "name", h.Name, "renewed", res.OK, "needed", w.quorum,
				"valid_for", h.deadline.Sub(now))
		}
	}
	if renewed != nil {
		w.order.requeue(renewed, last, r.number)
	}
	if r.last && w.stale {
		w.refresh()
		w.stale = false
	}
	w.mu.Unlock()
	for _, h := range lost {
		w.cfg.OnLost(h, Revocation(""))
	}
}

// expire ends every hold whose expiry has come: at its End (expired), or
// a lead before its deadline (quorum).
func (w *Watchdog) expire() {
	now := w.cfg.Clock.Now()
	var lost []*Hold
	var losses []Loss
	w.mu.Lock()
	for len(w.byExpiry) > 0 && w.byExpiry[0].key <= now.UnixNano() {
		h := w.byExpiry[0].h
		if h.expiry.After(now) { // renewed since it was placed: see byExpiry
			w.byExpiry[0].key = h.expiry.UnixNano()
			heap.Fix(&w.byExpiry, 0)
			continue
		}
		w.drop(h)
		h.loss = Loss{Reason: ReasonQuorum}
		if h.Kind == KindFixed || w.endsFirst(h) {
			h.loss = Loss{Reason: ReasonExpired}
		}
		lost, losses = append(lost, h), append(losses, h.loss)
	}
	w.mu.Unlock()
	for i, h := range lost {
		w.cfg.OnLost(h, losses[i])
	}
}
