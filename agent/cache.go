package agent

import (
	"context"
	"sync"
	"time"

	"github.com/lock-agent/lock-agent/protocol"
	"github.com/lock-agent/lock-agent/quorum"
	"github.com/lock-agent/lock-agent/renewal"
)

// Lock caching. When the last local holder of a name lets go and no local
// request waits for it, the agent keeps the hold's record in the masters
// for up to lock.cache_linger, renewed by the watchdog like any hold: the
// name is cached. A local LOCK of it meanwhile is answered from the agent,
// with no round on the masters: the record is lent to it, with the next
// fence of a block reserved on the masters (quorum.Cluster.Reserve), and
// comes back to the cache when it lets go. A record no client holds is
// marked cached on the masters (quorum.Cluster.MarkCached), after the
// UNLOCK was answered; a lent one is unmarked after the LOCK was answered.
//
// Another agent that finds only cached records in its way says so on the
// name's channel (quorum.Cluster.Wanted), and waits, a bounded time, for
// the release: the caching agent, subscribed while it caches, gives the
// name up at once if no client holds it, and lends it to no one after.
// A name a client holds answers BUSY as before, or after the bounded wait
// while its mark is late.
//
// Safety. Exclusion: the record stays on the masters from the grant that
// made it until the agent releases it, and the agent lends it to one local
// holder at a time, under Agent.mu, and only while the watchdog knows it
// valid for half a lease or more (as a cohort passes a name on), so a new
// holder never starts on a record about to be lost. Another agent is
// granted the name only once the record is released, which the agent does
// only while nobody holds it. Fences: a fence is lent only from a block
// that a majority reserved while the record was there (the grant's own,
// or Reserve's), so it is above every fence any agent was granted before
// and below every fence a later grant gets. A record the watchdog finds
// lost ends the cache without a word (no client holds it); the next LOCK
// goes to the masters.
//
// Kinds. Exclusive and shared locks kept by the watchdog cache; a record
// is lent only to a LOCK of the mode it was granted with. Semaphores
// (limit=), ttl= holds, fair=true, multi-name LOCKs, and holds with delay=,
// min_hold=, value= or notify=wanted do not: their records say more than
// who holds them (a tail, a value, a queue place, a slot) and a record
// lent on would have to carry or undo it.

// cache is a name whose record this agent keeps in the masters past its
// last local holder. Its fields are guarded by Agent.mu.
type cache struct {
	name   string
	rh     *renewal.Hold // the record, renewed by the watchdog
	mode   protocol.Mode // the record's claim: a LOCK of another mode is not lent it
	record quorum.Record // as the masters should hold it (see retag)
	// next and top are the fences left of its block; spare is the first
	// fence of a further reserved block (0: none).
	next, top, spare int64
	holder           *hold     // the local holder it is lent to; nil while cached
	idleSince        time.Time // when its last holder let go
	wanted           bool      // another agent said it waits: lent to no one more
	ended            bool      // given up: out of its name
	reserving        bool      // a Reserve is under way
	reserveFailed    bool
	retag            bool          // the holder changed since the record was sent
	wake             chan struct{} // the keeper looks at it again
	// writing says the keeper sleeps only until it may write again (less
	// than retagEvery), and then reads what changed: a lending or a
	// return need not wake it.
	writing bool
}

// changed wakes c's keeper after a lending or a return, unless it wakes
// soon anyway to write what changed: a name lent and returned in a tight
// loop costs its keeper a wake-up per write, not two per cycle. Agent.mu
// is held.
func (c *cache) changed() {
	if !c.writing {
		signal(c.wake)
	}
}

// cacheOn says whether lock caching is configured.
func (a *Agent) cacheOn() bool { return a.cfg.Lock.CacheLinger > 0 }

// cacheBlock is how many fences each block a cache reserves holds. The
// hybrid clock of the fence counters (see quorum/lua/acquire.lua) holds while
// B fences take more than B µs: a further block is reserved only once less
// than a quarter of the current one is left, each lending being a
// client's round trip.
const cacheBlock = 128

// cacheGrantBlock is how many fences a grant whose record may be cached
// reserves, so that a cache can lend at once, before its keeper reserved
// a block: few, since most grants are never lent on.
const cacheGrantBlock = 16

// cacheable says whether l's hold may be cached, and lent a cached record.
func cacheable(l protocol.Lock) bool {
	return limitOf(l) == 1 && l.TTL == 0 && !l.Fair && !tailOf(l).Any() && l.Value == "" && !l.NotifyWanted
}

// cacheHold gives the record lent to h, which h's session has just let go
// (h is out of the session's holds), back to its cache, at once: the
// keeper marks it cached in the background. It says whether it did; if
// not, the caller releases h.
func (a *Agent) cacheHold(h *hold) bool {
	if h.cache == nil {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	c := h.cache
	if !a.mayCacheLocked(h) || c.wanted || c.ended {
		return false
	}
	a.endHoldLocked(h)
	c.holder, c.idleSince = nil, a.clock.Now()
	c.changed()
	return true
}

// mayCacheLocked says whether h's record may be kept past h: h is of a
// kind that caches, still its record's holder and valid for half a lease,
// and no local request waits for the name. Agent.mu is held.
func (a *Agent) mayCacheLocked(h *hold) bool {
	if !h.cacheable || a.stopping || holderOf(h.rh) != h || a.waitsLocked(h.rh.Name) {
		return false
	}
	v, ok := a.watchdog.Validity(h.rh)
	return ok && v >= a.cfg.Lock.Lease/2
}

// cacheOrRelease ends h, which its session has just let go and no cache
// lent, in the masters with one round: its record is kept as the name's
// cache if no other agent waits (quorum.Cluster.CacheOrRelease), else
// released. It says whether that was all; if not, the caller releases h.
func (a *Agent) cacheOrRelease(ctx context.Context, h *hold) bool {
	if !a.cacheOn() {
		return false
	}
	name := h.rh.Name
	a.mu.Lock()
	try := a.cacheOn() && h.cache == nil && a.cacheLocked(name) == nil && (h.cohort == nil || !h.cohort.wanted) &&
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
		a.forget(h)
		a.pokeQueue(name)
		return true
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cacheLocked(name) != nil || !a.mayCacheLocked(h) { // a local LOCK came meanwhile: it goes to the masters
		return false
	}
	c := a.newCacheLocked(h)
	a.endHoldLocked(h)
	c.holder, c.idleSince = nil, a.clock.Now()
	return true
}

// waitsLocked says whether a local request waits for name. Agent.mu is held.
func (a *Agent) waitsLocked(name string) bool {
	q := a.queueLocked(name)
	if q == nil {
		return false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.waiters) > 0
}

// newCacheLocked makes h's record the name's cache, with the fences left
// of its block (a cohort's, if h is the last of a run), and starts its
// keeper. Agent.mu is held.
func (a *Agent) newCacheLocked(h *hold) *cache {
	c := &cache{name: h.rh.Name, rh: h.rh, mode: h.mode, record: h.rh.Record, next: h.fence + 1,
		top: h.rh.Record.Top, wake: make(chan struct{}, 1)}
	if co := h.cohort; co != nil && a.cohortLocked(co.name) == co {
		a.endRunLocked(co)
		c.record, c.next, c.top, c.spare = co.record, co.next, co.top, co.spare
	}
	a.nameLocked(c.name).cache = c
	go a.keepCache(c)
	return c
}

// lendCachedLocked answers l, a LOCK of one name by s, from the name's
// cache if it may (ok), with the new hold's snapshot. If the cache may not
// lend it (not lend: a multi-lock's; another agent waits, the record's
// validity runs low, another mode, no fences left), the cache is given up,
// and after says when its release has landed: the LOCK must go to the
// masters only then. s.mu is held.
func (s *session) lendCachedLocked(l protocol.Lock, lend bool) (r result, ok bool, after <-chan struct{}) {
	a := s.a
	if !a.cacheOn() {
		return r, false, nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	c := a.cacheLocked(l.Names[0])
	if c == nil || c.holder != nil || a.stopping {
		return r, false, nil
	}
	validity, live := a.watchdog.Validity(c.rh)
	if c.next > c.top && c.spare > 0 {
		c.next, c.top, c.spare = c.spare, c.spare+cacheBlock-1, 0
	}
	if !lend || !cacheable(l) || l.Mode != c.mode || c.wanted || !live || validity < a.cfg.Lock.Lease/2 || c.next > c.top {
		return r, false, a.giveUpLocked(c)
	}
	h := &hold{rh: c.rh, sess: s, owner: l.Owner, fence: c.next, acquired: []protocol.Mode{l.Mode}, mode: l.Mode,
		limit: 1, granted: time.Now(), gaugeMode: l.Mode, cache: c, cacheable: true}
	c.next++
	c.holder = h
	a.startHoldLocked(h)
	s.holds[holdKey{c.name, l.Owner}] = h
	c.record.Fence = h.fence
	c.record.Who = quorum.Who{Agent: a.cfg.AgentID, PID: s.cred.PID, UID: s.cred.UID, Owner: l.Owner, SinceMilli: time.Now().UnixMilli()}
	a.watchdog.SetRecord(c.rh, c.record) // a master that lacks it gets it back with the new holder's fence
	c.retag = true
	c.changed()
	a.metrics.cachedGrant()
	return h.snapshot(validity), true, nil
}

// giveUpLocked ends c and releases its record in the masters, in the
// background, and returns a channel closed once the release landed.
// Agent.mu is held; c has no holder.
func (a *Agent) giveUpLocked(c *cache) <-chan struct{} {
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
// more, and its keeper stops. Agent.mu is held.
func (a *Agent) endCacheLocked(c *cache) {
	if c.ended {
		return
	}
	c.ended = true
	if n := a.names[c.name]; n != nil && n.cache == c {
		n.cache = nil
		a.tidyLocked(n)
	}
	signal(c.wake)
}

// dropCacheLocked ends h's cache, if h was lent one: h's record is being
// released or was lost. Agent.mu is held.
func (a *Agent) dropCacheLocked(h *hold) {
	if h.cache != nil {
		a.endCacheLocked(h.cache)
	}
}

// cacheLost ends the cache whose record rh was lost while no client held
// it: silently (no one to tell), and the record is released once its
// validity ended, as a lost hold's is, or at once if it was revoked (a
// majority can no longer renew it, and REVOKE waits for it to end). It
// says whether rh was a cache's.
func (a *Agent) cacheLost(rh *renewal.Hold, loss renewal.Loss) bool {
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
		a.releaseAt(rh, at, nil)
	}
	return mine
}

// releaseCaches gives up every cache: the agent is stopping, and no
// session holds anything any more.
func (a *Agent) releaseCaches() {
	a.mu.Lock()
	var keys []quorum.RenewKey
	for _, n := range a.names {
		c := n.cache
		if c == nil {
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
func (a *Agent) cachesName(name string) bool {
	if !a.cacheOn() {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cacheLocked(name) != nil
}

// ownView is r, holder's record of name as the masters showed it,
// corrected by what this agent knows, if the record is one it keeps: its
// cache's, or a run's that it passes among its holders (see cohort.go).
// The masters learn that it was lent, came back or was passed on only
// after the client was answered (a retag), and this agent's WHO must show
// its own client's LOCK or UNLOCK that came before it.
func (a *Agent) ownView(name, holder string, r quorum.Record) quorum.Record {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c := a.cacheLocked(name); c != nil && c.rh.Holder == holder {
		r.Fence, r.Who, r.Cached = c.record.Fence, c.record.Who, c.holder == nil
	} else if c := a.cohortLocked(name); c != nil && c.rh.Holder == holder && holderOf(c.rh) != nil {
		// A local holder has it: not cached, whatever mark the masters
		// still carry (a cache turned into a run unmarks them in the
		// background: a WHO in between showed the holder as cached, n=0).
		r.Fence, r.Who, r.Cached = c.record.Fence, c.record.Who, false
	}
	return r
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

// ownCheck answers CHECK of fence on name from what this agent knows
// (mine), if fence is of a record it keeps: its cache's record's fence is
// current while it is lent; in a run it passes among its holders (see
// cohort.go), its current holder's fence is current, and every earlier
// fence of the name is not (no other agent holds it meanwhile). The
// masters learn that a record was lent, came back or was passed on only
// after the client was answered.
func (a *Agent) ownCheck(name string, fence uint64) (current, mine bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c := a.cacheLocked(name); c != nil && uint64(c.record.Fence) == fence {
		return c.holder != nil, true
	}
	if c := a.cohortLocked(name); c != nil && holderOf(c.rh) != nil && fence <= uint64(c.record.Fence) {
		return fence == uint64(c.record.Fence), true
	}
	return false, false
}
