package locks

import (
	"context"
	"sync"
	"time"

	"github.com/lock-agent/lock-agent/protocol"
	"github.com/lock-agent/lock-agent/quorum"
	"github.com/lock-agent/lock-agent/renewal"
)

// Lock caching: the lending policy that lingers (see lend.go, which says
// why it is safe). When the last local holder of a name lets go and no
// local request waits for it, the agent keeps the hold's record in the
// masters for up to lock.cache_linger: the name is cached. A local LOCK of
// it meanwhile is lent the record (LendCached), which comes back to
// the cache when it lets go (GiveBack). Neither sends the masters a
// command: the record there is marked cached when it is kept
// (quorum.Cluster.CacheOrRelease), and what lendings change of it (its
// current holder's fence and who-info, for WHO and CHECK on other agents,
// and whether a client holds it, its cached mark) is noted for all of the
// agent's caches together, at most once per renewal tick (NoteCaches).
// Other agents' WHO and CHECK are that much late: see docs/protocol.md.
//
// Another agent that finds only cached records in its way says so on the
// name's channel (quorum.Cluster.Wanted), and waits, a bounded time, for
// the release: the caching agent, subscribed while it caches, gives the
// name up at once if no client holds it, and lends it to no one after.
// A name a client holds answers BUSY as before, or after the bounded wait
// while its mark is late.

// cacheOn says whether lock caching is configured.
func (a *Manager) cacheOn() bool { return a.cfg.CacheLinger > 0 }

// cacheBlock is how many fences each block a cache reserves holds. The
// hybrid clock of the fence counters (see quorum/scripts/lua/acquire.lua) holds while
// B fences take more than B µs: a further block is reserved only once less
// than a quarter of the current one is left, each lending being a
// client's round trip.
const cacheBlock = 128

// cacheGrantBlock is how many fences a grant whose record may be cached
// reserves, so that a cache can lend at once, before its keeper reserved
// a block: few, since most grants are never lent on.
const cacheGrantBlock = 16

// GiveBack passes the record lent to h, which h's session has just let go
// (h is out of the session's holds), on without a round on the masters: to
// the head of the name's queue, in a run (see passOn), or back to its cache
// (see cacheHold). It says whether it did; if not, the caller releases h.
func (a *Manager) GiveBack(h *Hold) bool {
	a.mu.Lock()
	l := h.lent
	a.mu.Unlock()
	if l == nil {
		return false
	}
	if l.policy == lendRun {
		return a.passOn(h, l)
	}
	return a.cacheHold(h)
}

// cacheHold gives the record lent to h, which h's session has just let go,
// back to its cache, at once: the keeper marks it cached in the
// background. It says whether it did.
func (a *Manager) cacheHold(h *Hold) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := h.lent
	if c == nil || c.policy != lendLinger || !a.mayCacheLocked(h) || c.wanted || c.ended {
		return false
	}
	a.endHoldLocked(h)
	c.holder, c.idleSince = nil, a.clock.Now()
	a.noteLaterLocked(c)
	return true
}

// mayCacheLocked says whether h's record may be kept past h: h is of a
// kind that caches, still its record's holder and valid for half a lease,
// and no local request waits for the name. manager.mu is held.
func (a *Manager) mayCacheLocked(h *Hold) bool {
	if !h.cacheable || a.stopping || holderOf(h.rh) != h || a.waitsLocked(h.rh.Name) {
		return false
	}
	_, valid := a.lendValidity(h.rh)
	return valid
}

// cacheOrRelease ends h, which its session has just let go and no cache
// lent, in the masters with one round: its record is kept as the name's
// cache if no other agent waits (quorum.Cluster.CacheOrRelease), else
// released. It says whether that was all; if not, the caller releases h.
func (a *Manager) cacheOrRelease(ctx context.Context, h *Hold) bool {
	if !a.cacheOn() {
		return false
	}
	name := h.rh.Name
	a.mu.Lock()
	lent := h.lent // not a cache's (those are given back), nor a run's another agent waits for
	try := a.cacheOn() && (lent == nil || lent.policy == lendRun && !lent.wanted) && a.cacheLocked(name) == nil &&
		!a.shared.has(name, a.clock.Now()) && a.mayCacheLocked(h)
	a.mu.Unlock()
	if !try {
		a.released.note(name, a.clock.Now())
		return false
	}
	kept, err := a.cluster.CacheOrRelease(ctx, name, h.rh.Holder)
	if err != nil {
		return false
	}
	if !kept { // released: what is left is the agent's books
		a.shared.note(name, a.clock.Now())
		a.Forget(h)
		a.pokeQueue(name)
		return true
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cacheLocked(name) != nil || !a.mayCacheLocked(h) { // a local LOCK came meanwhile: it goes to the masters
		return false
	}
	c := a.newCacheLocked(h)
	if c == nil {
		return false
	}
	a.endHoldLocked(h)
	c.holder, c.idleSince = nil, a.clock.Now()
	return true
}

// waitsLocked says whether a local request waits for name. manager.mu is held.
func (a *Manager) waitsLocked(name string) bool {
	q := a.queueLocked(name)
	if q == nil {
		return false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.waiters) > 0
}

// newCacheLocked makes h's record the name's cache, with the fences left
// of its block (a run's, if h is the last of one), and starts its keeper;
// nil if the name lends another record. manager.mu is held.
func (a *Manager) newCacheLocked(h *Hold) *lending {
	c := &lending{policy: lendLinger, name: h.rh.Name, rh: h.rh, mode: h.mode, record: h.rh.Record, next: h.fence + 1,
		top: h.rh.Record.Top, block: cacheBlock, wake: make(chan struct{}, 1)}
	if run := h.lent; run != nil && run.policy == lendRun && a.lendsLocked(run) {
		a.stopLendingLocked(run)
		c.record, c.next, c.top, c.spare = run.record, run.next, run.top, run.spare
	}
	if !a.startLendingLocked(c) {
		return nil
	}
	if c.reserveDue() { // at once: a grant's few fences go fast in a tight loop
		c.reserving = true
		go a.reserve(c)
	}
	go a.keepCache(c)
	return c
}

// LendCached answers l, a LOCK of one name by c, from the name's cache if
// it may (ok), with the new hold (which the caller makes c's) and its
// snapshot; who is its who-info. If the cache may not lend it (not lend: a
// multi-lock's; another agent waits, the record's validity runs low,
// another mode, no fences left), the cache is given up, and after says when
// its release has landed: the LOCK must go to the masters only then. c's mu
// is held.
func (a *Manager) LendCached(c Client, l protocol.Lock, who quorum.Who, lend bool) (h *Hold, r Result, ok bool, after <-chan struct{}) {
	if !a.cacheOn() {
		return nil, r, false, nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	cache := a.cacheLocked(l.Names[0])
	if cache == nil || cache.holder != nil || a.stopping {
		return nil, r, false, nil
	}
	validity, valid := a.lendValidity(cache.rh)
	if !lend || !lendable(l, lendLinger) || l.Mode != cache.mode || cache.wanted || !valid || cache.next > cache.top && cache.spare == 0 {
		return nil, r, false, a.giveUpLocked(cache)
	}
	cache.holder = a.lendLocked(cache, c, l, who)
	a.metrics.cachedGrant()
	return cache.holder, cache.holder.Snapshot(validity), true, nil
}

// giveUpLocked ends c and releases its record in the masters, in the
// background, and returns a channel closed once the release landed.
// manager.mu is held; c has no holder.
func (a *Manager) giveUpLocked(c *lending) <-chan struct{} {
	done := make(chan struct{})
	a.endCacheLocked(c)
	a.metrics.cacheGivenUp()
	go func() {
		defer close(done)
		a.watchdog.Remove(c.rh)
		a.release(context.Background(), c.name, c.rh.Holder, false)
	}()
	return done
}

// endCacheLocked takes c out of its name: it lends to no one
// more, and its keeper stops. manager.mu is held.
func (a *Manager) endCacheLocked(c *lending) {
	if c.ended {
		return
	}
	c.ended = true
	a.stopLendingLocked(c)
	signal(c.wake)
}

// dropCacheLocked ends h's cache, if h was lent one: h's record is being
// released or was lost. manager.mu is held.
func (a *Manager) dropCacheLocked(h *Hold) {
	if c := h.lent; c != nil && c.policy == lendLinger {
		a.endCacheLocked(c)
	}
}

// cacheLost ends the cache whose record rh was lost while no client held
// it: silently (no one to tell), and the record is released once its
// validity ended, as a lost hold's is, or at once if it was revoked (a
// majority can no longer renew it, and REVOKE waits for it to end). It
// says whether rh was a cache's.
func (a *Manager) cacheLost(rh *renewal.Hold, loss renewal.Loss) bool {
	a.mu.Lock()
	c := a.cacheLocked(rh.Name)
	mine := c != nil && c.rh == rh && c.holder == nil
	if mine {
		a.endCacheLocked(c)
		a.metrics.cacheGivenUp()
	}
	a.mu.Unlock()
	if mine {
		at := a.watchdog.Deadline(rh)
		if loss.Revoked() {
			at = time.Time{} // no client to tell
		}
		a.releaseAt(rh, at, nil, nil)
	}
	return mine
}

// ReleaseCaches gives up every cache: the agent is stopping, and no
// session holds anything any more.
func (a *Manager) ReleaseCaches() {
	a.mu.Lock()
	var keys []quorum.RenewKey
	for _, n := range a.names {
		c := n.lent
		if c == nil || c.policy != lendLinger {
			continue
		}
		if c.holder == nil {
			keys = append(keys, quorum.RenewKey{Name: c.name, Holder: c.rh.Holder})
			a.watchdog.Remove(c.rh)
		}
		a.endCacheLocked(c)
	}
	a.mu.Unlock()
	if len(keys) > 0 {
		a.cluster.ReleaseMany(context.Background(), keys)
	}
}

// cachesName says whether this agent keeps name cached, lent or not.
func (a *Manager) cachesName(name string) bool {
	if !a.cacheOn() {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cacheLocked(name) != nil
}

// keepCache is c's keeper, for as long as c lives: it listens on the
// name's channel for other agents that wait (and then gives c up if no
// client holds it), gives c up when it lingered cache_linger with no
// holder, and reserves a further block of fences if one is due that the
// cache's start and its lendings did not reserve (see reserveDue). It
// is not woken by lendings and returns: it looks at c at least once per
// cache_linger. What lendings change of the record is noted in batches
// (NoteCaches); the keeper makes only the first note.
func (a *Manager) keepCache(c *lending) {
	ctx := a.runCtx
	watch := a.cluster.Watch(ctx, c.name)
	defer watch.Close()
	a.awaitSubscribed(watch)
	// CacheOrRelease marked it. The first note asks the masters whether
	// an acquire found it in its way meanwhile: that try's word came
	// before the keeper listened.
	a.firstNote(c)
	for {
		st := a.cacheState(c)
		if st.ended || ctx.Err() != nil {
			return
		}
		if st.reserve { // first: a LOCK that finds no fences left gives the cache up
			a.reserve(c)
			continue
		}
		t := a.clock.NewTimer(st.linger)
		select {
		case <-watch.Wanted():
			watch.Wants() // what they want does not matter: any waiter ends a cache
			a.cacheWanted(c)
		case <-c.wake:
		case <-t.C():
			a.cacheLingered(c)
		case <-ctx.Done():
		}
		t.Stop()
	}
}

// awaitSubscribed waits, at most 4×master_timeout, for a master to
// confirm w: the cached mark, which makes other agents say that they
// wait, goes out only once the keeper can hear them.
func (a *Manager) awaitSubscribed(w *quorum.Watch) {
	t := a.clock.NewTimer(4 * a.cfg.MasterTimeout)
	defer t.Stop()
	select {
	case <-w.Recheck():
	case <-t.C():
	case <-a.runCtx.Done():
	}
}

// cacheState is what the keeper must do for a cache, read under manager.mu.
type cacheState struct {
	ended   bool
	reserve bool          // a further block is due
	linger  time.Duration // how long the keeper may sleep: what is left of the linger, or all of it while lent
}

func (a *Manager) cacheState(c *lending) cacheState {
	a.mu.Lock()
	defer a.mu.Unlock()
	st := cacheState{ended: c.ended, linger: a.cfg.CacheLinger}
	if c.holder == nil {
		st.linger = max(c.idleSince.Add(a.cfg.CacheLinger).Sub(a.clock.Now()), time.Nanosecond)
	}
	st.reserve = c.reserveDue()
	if st.reserve {
		c.reserving = true
	}
	return st
}

// reserveDue says whether a linger should reserve a further block now:
// less than a quarter of its block is left, none is spare or being
// reserved, and no other agent waits. manager.mu is held.
func (l *lending) reserveDue() bool {
	return !l.reserving && !l.reserveFailed && l.spare == 0 && !l.wanted && l.top-l.next < cacheBlock/4
}

// noteLaterLocked has what changed of c (a lending or a return) noted in
// the next batch (NoteCaches). manager.mu is held.
func (a *Manager) noteLaterLocked(c *lending) {
	if !c.toNote {
		c.toNote = true
		a.toNote = append(a.toNote, c)
	}
}

// noteLocked is c's note as it is now, and its pending changes are
// cleared. manager.mu is held.
func (a *Manager) noteLocked(c *lending) quorum.CacheNote {
	c.retag = false
	return quorum.CacheNote{Name: c.name, Holder: c.rh.Holder, Record: c.record, Cached: c.holder == nil}
}

// firstNote is c's first note, made by its keeper once it listens, even
// if nothing changed: the masters' answer says whether an acquire found
// the record in its way before. The batches note c only after it.
func (a *Manager) firstNote(c *lending) {
	a.mu.Lock()
	note := a.noteLocked(c)
	a.mu.Unlock()
	answer := a.cluster.NoteCaches(a.runCtx, []quorum.CacheNote{note})[0]
	a.mu.Lock()
	c.noted = true
	if answer.Missed && !c.ended {
		a.noteLaterLocked(c) // the next batch sends it again
	}
	a.mu.Unlock()
	if answer.Wanted {
		a.cacheWanted(c)
	}
}

// NoteCaches writes what lendings changed of this agent's caches (see the
// top of this file), every renewal tick, all of them in one batch
// (quorum.Cluster.NoteCaches): a tick in which no cache was lent or given
// back writes nothing. It runs until ctx ends.
func (a *Manager) NoteCaches(ctx context.Context) error {
	if !a.cacheOn() {
		return nil
	}
	for {
		t := a.clock.NewTimer(a.watchdog.Interval())
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return nil
		}
		a.noteBatch(ctx)
	}
}

// noteBatch notes what changed of this agent's caches since the last batch.
func (a *Manager) noteBatch(ctx context.Context) {
	a.mu.Lock()
	pending := a.toNote
	a.toNote = nil
	var notes []quorum.CacheNote
	var caches []*lending
	for _, c := range pending {
		switch {
		case c.ended:
			c.toNote = false
		case !c.noted: // its keeper's first note is yet to come: the next batch
			a.toNote = append(a.toNote, c)
		default:
			c.toNote = false
			notes = append(notes, a.noteLocked(c))
			caches = append(caches, c)
		}
	}
	a.mu.Unlock()
	answers := a.cluster.NoteCaches(ctx, notes)
	a.mu.Lock()
	for i, answer := range answers {
		// Masters that missed a note count every fence above the one
		// before current (CHECK): it goes again until a majority has it.
		if c := caches[i]; answer.Missed && !c.ended {
			a.noteLaterLocked(c)
		}
	}
	a.mu.Unlock()
	for i, answer := range answers {
		if answer.Wanted {
			a.cacheWanted(caches[i])
		}
	}
}

// cacheWanted gives c up at once if no client holds it: another agent
// waits for the name. A lent one is lent to no one more, and the waiting
// agents hear that a client holds it (quorum.Cluster.Held): a wait=0 try
// answers BUSY then, rather than wait for a release.
func (a *Manager) cacheWanted(c *lending) {
	a.mu.Lock()
	defer a.mu.Unlock()
	c.wanted = true
	a.shared.note(c.name, a.clock.Now())
	switch {
	case c.ended:
	case c.holder == nil:
		a.giveUpLocked(c)
	default:
		a.cluster.Held(c.name)
	}
}

// cacheLingered gives c up if it lingered cache_linger with no holder.
func (a *Manager) cacheLingered(c *lending) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c.holder == nil && !c.ended && a.clock.Now().Sub(c.idleSince) >= a.cfg.CacheLinger {
		a.endCacheLocked(c)
		go func() {
			a.watchdog.Remove(c.rh)
			a.release(a.runCtx, c.name, c.rh.Holder, false)
		}()
	}
}

// Names other agents want too. A name that another agent took from this
// agent's cache, or waited for when its hold ended, is not cached again
// for sharedFor: caching it would make the other agent's next LOCK ask
// for it and wait for its release, where a plain release lets it in at
// once (two agents that take turns on a name lose nothing to caching).

// recentNames remembers names, each with when it was last noted, for a
// window: what is older, or beyond max names, is forgotten first, which
// costs no more than a cache not kept or kept in vain. Its mutex is a
// leaf: nothing else is locked while it is held.
type recentNames struct {
	mu     sync.Mutex
	at     map[string]time.Time
	window time.Duration
	max    int
}

func newRecentNames(window time.Duration, max int) *recentNames {
	return &recentNames{at: map[string]time.Time{}, window: window, max: max}
}

// note remembers that name was seen at now.
func (r *recentNames) note(name string, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.at) >= r.max {
		for n, at := range r.at {
			if now.Sub(at) >= r.window {
				delete(r.at, n)
			}
		}
		if len(r.at) >= r.max {
			clear(r.at)
		}
	}
	r.at[name] = now
}

// has says whether name was noted within the window before now.
func (r *recentNames) has(name string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.at[name]
	if ok && now.Sub(at) >= r.window {
		delete(r.at, name)
		return false
	}
	return ok
}

// The names other agents wanted lately (shared) are not cached for
// 10×cache_linger: a name two agents take in turn would cost each turn a
// give-up. The names this agent released to the masters lately (released)
// are the ones worth caching: a LOCK of one within cache_linger of its
// release says the name is used again and again, and its next release
// keeps it (see claim). A name used once, or seldom, is released at once,
// as with caching off, and costs no keeper, no subscription and no mark.
const (
	maxShared   = 4096
	maxReleased = 1 << 16
)
