package quorum

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/lock-agent/lock-agent/quorum/scripts"
)

// Lock caching. An agent may keep a hold's record in the masters after its
// last local client let go (see agent/locks/cache.go), so that its next local
// LOCK of the name needs no round. The record then says so: its hash has
// the field cached=1. An acquire that finds only cached records in its way
// says so (Refusal.OnlyCached), and its agent tells the caching agents
// that it waits (Wanted), which makes them release at once; a record a
// client really holds answers BUSY as before. WHO shows a cached record as
// cached, and it leads nothing (see Leader).
//
// The mark is a hint, never a fact to be safe by: an agent writes it after
// the client's UNLOCK was answered, and clears it after it granted the
// name to a local client again, so a remote acquire may find a record
// marked cached that a client holds, or one not marked that no client
// holds. A try is therefore steered by another field: a record kept as a
// cache has kept=1, from the round that kept it (CacheOrRelease) until it
// is released, lent or not, so it is never late. An acquire that finds
// only kept records in its way says so (Refusal.OnlyKept); a wait=0 try
// then says that it waits, and the keeping agent, which listens while it
// keeps the record, answers at once: it releases a record no client holds
// (and one an acquire marked wanted, when it next writes the mark: a word
// sent before it listened is lost), and says that a client holds one it
// lent (Held), which the try answers BUSY. Exclusion never depends on
// either: only the caching agent ever removes its record.

// cachedMessage, on a name's channel, says a record became cached: other
// agents' waiters, parked until a release, try again, find only cached
// records, and say they wait (see Wanted), which ends the cache. Without
// it a waiter whose word the caching agent missed (it was not subscribed
// yet) would wait for the cache's linger.
const cachedMessage = "cached"

// CacheOrRelease ends holder's hold of name as its agent's last local
// holder let go: it keeps the record, marked cached, if no other agent
// waits for the name and none observes it (see MarkObserved), and says so
// (kept); else it releases it. It costs
// one round, as Release does, and decides on each master atomically, so
// that an agent whose waiter recorded itself (see SetWaiting) before is
// never kept waiting by a cache. It keeps the record only if a majority
// kept it and none released it; else it releases it everywhere.
func (c *Cluster) CacheOrRelease(ctx context.Context, name, holder string) (kept bool, err error) {
	if c.closed() {
		return false, ErrClosed
	}
	keys, args := c.releaseArgs(name, holder, name)
	keys = append(keys, c.keys.Waiting(name), c.keys.WaitingDeadlines(name), c.keys.Queue(name), c.keys.Observed(name))
	args = append(args, c.cfg.InstanceID)
	var cached, released int
	c.vote(ctx, roundSpec{op: OpRelease, script: scripts.CacheOrRelease, keys: keys, args: args, land: true,
		judge: func(a answer) (int, bool, error) {
			v, err := a.res.AsInt64()
			switch {
			case err != nil:
			case v == 2:
				cached++
			case v != 3:
				released++
			}
			// A master the record missed decides nothing: the round waits
			// for another's answer.
			return 0, err == nil && v != 3, err
		}})
	if cached >= c.quorum && released == 0 {
		return true, nil
	}
	if released == len(c.masters) {
		return false, nil // released everywhere
	}
	_, err = c.Release(ctx, name, holder)
	return false, err
}

// MarkCached writes on every master that has holder's record of name
// whether its agent keeps it cached (no client holds it). Like Retag it
// goes to every connected master and lands in the background on those that
// answer late; it returns once a majority has it (or once the round no
// longer waits for its silent masters: see Patience) and says on how many
// masters it landed by then, and whether any of them records that an acquire found the record
// in its way (wanted): another agent's try, whose word may have come
// before this agent listened (see Refusal.OnlyKept).
func (c *Cluster) MarkCached(ctx context.Context, name, holder string, cached bool) (landed int, wanted bool) {
	mark := "0"
	if cached {
		mark = "1"
	}
	return c.markCached(ctx, name, holder, mark)
}

// Unkeep is MarkCached(false) of a record that its agent no longer keeps
// as a cache (its holder passes it on to other local holders: see
// agent/locks/cohort.go): it also drops its kept field, so that another agent's
// wait=0 try that finds it in its way answers BUSY at once.
func (c *Cluster) Unkeep(ctx context.Context, name, holder string) {
	c.markCached(ctx, name, holder, "0", "unkept")
}

func (c *Cluster) markCached(ctx context.Context, name, holder string, args ...string) (landed int, wanted bool) {
	if c.closed() {
		return 0, false
	}
	keys := []string{c.keys.Holder(name, holder), c.keys.Observed(name)}
	args = slices.Insert(args, 1, c.keys.Channel(name))
	res, _ := c.vote(ctx, roundSpec{op: OpSet, script: scripts.Cached, keys: keys, args: args, land: true,
		judge: func(a answer) (int, bool, error) {
			v, err := a.res.AsInt64()
			wanted = wanted || err == nil && v == 2
			return 0, err == nil && v >= 1, err
		}})
	return res.yes(), wanted
}

// CacheNote is what a caching agent tells the masters of one record it
// keeps as a cache (see NoteCaches).
type CacheNote struct {
	Name, Holder string
	// Record carries the current holder's fence and who-info: the last
	// local holder the record was lent to.
	Record Record
	// Cached says no client holds it now.
	Cached bool
}

// NoteCaches writes, on every connected master that has the record, each
// note's fence and who-info (never a lower fence than the record
// carries) and its cached mark: what lendings of cached records changed
// since the agent's last note. A lending itself sends the masters nothing
// (see agent/locks/cache.go); its agent notes all that changed of its caches
// together, at most once per renewal tick, in one pipeline per master on
// the bulk connection, as ReleaseMany releases. A master that misses a
// note keeps the earlier one, and CHECK there counts every fence above
// it current (scripts/lua/check.lua): so each answer says whether the
// masters that did not take the note could be a majority (Missed), and
// its agent then sends it again. It returns when every master answered or
// its deadline passed (as ReleaseMany's), and says for each note whether
// a master records that an acquire found the record in its way (Wanted:
// see MarkCached).
func (c *Cluster) NoteCaches(ctx context.Context, notes []CacheNote) []NoteAnswer {
	out := make([]NoteAnswer, len(notes))
	took := make([]int, len(notes)) // masters that answered each note
	defer func() {
		for i := range out {
			out[i].Missed = took[i] <= len(c.masters)-c.quorum
		}
	}()
	if len(notes) == 0 || c.closed() {
		return out
	}
	calls := make([]call, len(notes))
	for i, n := range notes {
		mark := "0"
		if n.Cached {
			mark = "1"
		}
		f := n.Record.fields() // recordFields order: fence is 3, who-info and value 4..9
		calls[i] = call{keys: []string{c.keys.Holder(n.Name, n.Holder), c.keys.Observed(n.Name)},
			args: append(append([]string{f[3]}, f[4:]...), c.keys.Channel(n.Name), mark)}
	}
	opCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx),
		max(20*c.cfg.MasterTimeout, time.Second)+time.Duration(len(notes))*10*time.Microsecond)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, m := range c.masters {
		if m.conn(laneBulk) == nil {
			continue
		}
		wg.Go(func() {
			for lo := 0; lo < len(calls) && opCtx.Err() == nil; lo += releaseChunk {
				res := m.evalMulti(opCtx, scripts.CacheNote, calls[lo:min(lo+releaseChunk, len(calls))])
				mu.Lock()
				for i, r := range res {
					v, err := r.AsInt64()
					if err != nil {
						continue
					}
					took[lo+i]++
					out[lo+i].Wanted = out[lo+i].Wanted || v == 2
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return out
}

// NoteAnswer is what the masters answered one note of NoteCaches.
type NoteAnswer struct {
	// Wanted says an acquire found the record in its way on some master,
	// or the name is observed there: either way its agent gives the
	// cache up (see scripts/lua/cache_note.lua).
	Wanted bool
	// Missed says the masters that did not take the note (not connected,
	// failed, or silent to the deadline) could be a majority: they count
	// fences above the earlier note current, so it must be sent again.
	Missed bool
}
