package agent

import (
	"time"

	"github.com/lock-agent/lock-agent/quorum"
)

// keepCache is c's keeper, for as long as c lives: it listens on the
// name's channel for other agents that wait (and then gives c up if no
// client holds it), gives c up when it lingered cache_linger with no
// holder, and tells the masters what changed, at most once per
// retagEvery: the cached mark (quorum.Cluster.MarkCached), the lent
// holder (Retag), and a further block of fences when a quarter of the
// last is left (Reserve).
func (a *Agent) keepCache(c *lending) {
	ctx := a.runCtx
	watch := a.cluster.Watch(ctx, c.name)
	defer watch.Close()
	a.awaitSubscribed(watch)
	// CacheOrRelease marked it. The first write asks the masters whether
	// an acquire found it in its way meanwhile: that try's word came
	// before the keeper listened.
	k := keeper{marked: true, check: true}
	for {
		st := a.cacheState(c, k.marked)
		if st.ended || ctx.Err() != nil {
			return
		}
		if st.reserve { // first: a LOCK that finds no fences left gives the cache up
			a.reserve(c)
			continue
		}
		if wait := k.due(a.clock.Now()); wait == 0 && k.pending(st) {
			k.write(a, c, st)
			continue
		}
		t := a.clock.NewTimer(k.timeout(a.clock.Now(), st))
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
func (a *Agent) awaitSubscribed(w *quorum.Watch) {
	t := a.clock.NewTimer(4 * a.cfg.Lock.MasterTimeout)
	defer t.Stop()
	select {
	case <-w.Recheck():
	case <-t.C():
	case <-a.runCtx.Done():
	}
}

// cacheState is what the keeper must do for a cache, read under Agent.mu.
type cacheState struct {
	ended   bool
	mark    bool          // the masters should hold it as cached: no client holds it
	retag   bool          // the record names another holder than the masters were sent
	reserve bool          // a further block is due
	linger  time.Duration // left of its linger while no client holds it (0: lent)
}

func (a *Agent) cacheState(c *lending, marked bool) cacheState {
	a.mu.Lock()
	defer a.mu.Unlock()
	st := cacheState{ended: c.ended, mark: c.holder == nil, retag: c.retag}
	c.writing = st.mark != marked || st.retag // see keeper.timeout
	if c.holder == nil {
		st.linger = max(c.idleSince.Add(a.cfg.Lock.CacheLinger).Sub(a.clock.Now()), time.Nanosecond)
	}
	st.reserve = !c.reserving && !c.reserveFailed && c.spare == 0 && !c.wanted && c.top-c.next < cacheBlock/4
	if st.reserve {
		c.reserving = true
	}
	return st
}

// keeper is what c's keeper remembers of what it told the masters.
type keeper struct {
	marked  bool      // the mark last sent
	check   bool      // the mark is to be sent even if unchanged (see write)
	written time.Time // when it last wrote to the masters
}

// pending says whether the keeper has something to write.
func (k keeper) pending(st cacheState) bool { return st.mark != k.marked || st.retag || k.check }

// due is how long before the keeper may write to the masters again.
func (k keeper) due(now time.Time) time.Duration {
	return max(k.written.Add(retagEvery).Sub(now), 0)
}

// timeout is how long the keeper may sleep: until its linger ends, or
// until a pending write is due.
func (k keeper) timeout(now time.Time, st cacheState) time.Duration {
	d := time.Hour
	if st.linger > 0 {
		d = st.linger
	}
	if k.pending(st) {
		d = min(d, max(k.due(now), time.Nanosecond))
	}
	return d
}

// write sends the masters what changed of c: its lent holder first (a
// retag), then its mark.
func (k *keeper) write(a *Agent, c *lending, st cacheState) {
	k.written = a.clock.Now()
	if st.retag {
		// The record as it is now, read where the flag is cleared: a
		// holder lent it since st was read sets the flag again after.
		a.mu.Lock()
		record := c.record
		c.retag = false
		a.mu.Unlock()
		a.cluster.Retag(a.runCtx, c.name, c.rh.Holder, record)
	}
	if st.mark != k.marked || k.check {
		// A master that records the name wanted (an acquire found it in
		// its way) says another agent waits, whose word may be lost.
		_, wanted := a.cluster.MarkCached(a.runCtx, c.name, c.rh.Holder, st.mark)
		k.marked, k.check = st.mark, false
		if wanted {
			a.cacheWanted(c)
		}
	}
}

// cacheWanted gives c up at once if no client holds it: another agent
// waits for the name. A lent one is lent to no one more, and the waiting
// agents hear that a client holds it (quorum.Cluster.Held): a wait=0 try
// answers BUSY then, rather than wait for a release.
func (a *Agent) cacheWanted(c *lending) {
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
func (a *Agent) cacheLingered(c *lending) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c.holder == nil && !c.ended && a.clock.Now().Sub(c.idleSince) >= a.cfg.Lock.CacheLinger {
		a.endCacheLocked(c)
		go func() {
			a.watchdog.Remove(c.rh)
			a.release(a.runCtx, c.name, c.rh.Holder, false)
		}()
	}
}
