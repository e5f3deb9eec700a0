package quorum

import (
	"context"
	"strings"
	"sync"
)

// Watch is a subscription to the release messages of one name. C receives
// (coalesced) when the name may have been released anywhere, and whenever a
// master (re)subscribes, since messages sent while it was away are lost.
type Watch struct {
	c       *Cluster
	channel string
	wake    chan struct{}
	recheck chan struct{}
	wanted  chan struct{}
	held    chan struct{}
	leader  chan struct{}
	wants   map[string]Want // since the last Wants; guarded by the Cluster's watchMu
	once    sync.Once
}

// Leader receives (coalesced) when the name's holders may have changed: a
// grant of an observed name (see MarkObserved), a SET, any release or
// hand-over (a give-back too), and whenever a master (re)subscribes. It is
// a hint to read the holders again (see Cluster.Leader), never a fact:
// messages are lost while a master is away, and a lease that runs out
// publishes nothing.
func (w *Watch) Leader() <-chan struct{} { return w.leader }

// C returns the wake-up channel.
func (w *Watch) C() <-chan struct{} { return w.wake }

// Wanted receives (coalesced) when another agent said it waits for the name
// (see Cluster.Wanted). Messages are lost while a master is unreachable:
// it is a hint for fairness, never a fact to be safe by.
func (w *Watch) Wanted() <-chan struct{} { return w.wanted }

// Held receives (coalesced) when another agent said that a client of its
// holds the name (see Cluster.Held), which it keeps as a cache. A hint,
// as Wanted is.
func (w *Watch) Held() <-chan struct{} { return w.held }

// Recheck receives (coalesced) when a master confirmed the subscription: a
// release before it would have been missed, so look again. It is not a
// release: an attempt it prompts that fails says nothing about contention.
func (w *Watch) Recheck() <-chan struct{} { return w.recheck }

// Watch subscribes to name's release messages on every master. It returns
// at once: each master's subscription is made in the background (a hung
// master holds up nothing), and C receives when one is confirmed, since a
// release before it would have been missed.
func (c *Cluster) Watch(ctx context.Context, name string) *Watch {
	return c.watchChannel(ctx, c.keys.Channel(name))
}

func (c *Cluster) watchChannel(ctx context.Context, channel string) *Watch {
	w := &Watch{c: c, channel: channel, wake: make(chan struct{}, 1), recheck: make(chan struct{}, 1), wanted: make(chan struct{}, 1),
		held: make(chan struct{}, 1), leader: make(chan struct{}, 1)}
	c.watchMu.Lock()
	set := c.watches[w.channel]
	first := set == nil
	if first {
		set = &watchSet{watches: map[*Watch]struct{}{}}
		c.watches[w.channel] = set
	}
	set.watches[w] = struct{}{}
	if set.confirmed {
		// A master confirmed the channel before w joined: what was
		// released before w came was missed by w, as before any
		// subscription, so w looks again, as its confirmation says.
		signal(w.recheck)
		signal(w.leader)
	}
	c.watchMu.Unlock()
	if first {
		for _, m := range c.masters {
			c.goBackground(func() {
				if m.subscribe(context.WithoutCancel(ctx), w.channel) {
					c.watchMu.Lock()
					if c.watches[w.channel] == set {
						set.confirmed = true
					}
					for w := range c.watches[w.channel].all() {
						signal(w.recheck)
						signal(w.leader)
					}
					c.watchMu.Unlock()
				}
			})
		}
	}
	return w
}

// confirm notes that a master confirmed channel's subscription made anew
// (see shardSubs.place): its watches look again, as for a first one.
func (c *Cluster) confirm(channel string) {
	c.watchMu.Lock()
	defer c.watchMu.Unlock()
	set := c.watches[channel]
	if set == nil {
		return
	}
	set.confirmed = true
	for w := range set.watches {
		signal(w.recheck)
		signal(w.leader)
	}
}

// watchSet is the watches of one channel; confirmed says a master
// confirmed its subscription. Guarded by the Cluster's watchMu.
type watchSet struct {
	watches   map[*Watch]struct{}
	confirmed bool
}

// all is the set's watches (none for a nil set).
func (s *watchSet) all() map[*Watch]struct{} {
	if s == nil {
		return nil
	}
	return s.watches
}

// Close ends the watch; the last watch of a name unsubscribes it.
func (w *Watch) Close() {
	w.once.Do(func() {
		c := w.c
		c.watchMu.Lock()
		set := c.watches[w.channel]
		delete(set.watches, w)
		last := len(set.watches) == 0
		if last {
			delete(c.watches, w.channel)
		}
		c.watchMu.Unlock()
		if last && !c.closed() {
			go c.eachMaster(context.Background(), func(ctx context.Context, m *master) { m.unsubscribe(ctx, w.channel) })
		}
	})
}

func (c *Cluster) onMessage(channel, message string) {
	if strings.HasPrefix(message, heldPrefix) { // neither a release nor a change of holder
		c.heardHeld(channel, message)
		return
	}
	if !strings.HasPrefix(message, wantedPrefix) { // a waiter is not a change of holder
		c.signalLeader(channel)
	}
	if message == c.giveBack || message == leaderMessage {
		// Neither is a release for the waiters: a give-back of this agent
		// would only fail its own waiters again, and a new leader or value
		// frees nothing.
		return
	}
	if strings.HasPrefix(message, revokePrefix) {
		c.onRevoke(message) // not a release: the holder's agent ends it, and that wakes waiters
		return
	}
	if strings.HasPrefix(message, handoverPrefix) {
		if message != c.handover {
			c.watchMu.Lock()
			for w := range c.watches[channel].all() {
				signal(w.recheck)
			}
			c.watchMu.Unlock()
		}
		return
	}
	if strings.HasPrefix(message, wantedPrefix) {
		c.heardWanted(channel, message)
		return
	}
	c.watchMu.Lock()
	defer c.watchMu.Unlock()
	for w := range c.watches[channel].all() {
		w.signal()
	}
}

// wantedPrefix starts the message of Wanted, heldPrefix that of Held,
// handoverPrefix that of HandOver; leaderMessage is what a grant of an observed name and a SET
// publish (written into scripts/lua/acquire.lua and scripts/lua/set_value.lua too). No name has a
// space, so none of them is a release message (a name).
const (
	wantedPrefix   = "wanted "
	heldPrefix     = "held "
	handoverPrefix = "handover "
	leaderMessage  = "leader changed"
)

// signalLeader signals the Leader channel of channel's watches.
func (c *Cluster) signalLeader(channel string) {
	c.watchMu.Lock()
	defer c.watchMu.Unlock()
	for w := range c.watches[channel].all() {
		signal(w.leader)
	}
}

func (c *Cluster) wakeAll() {
	c.watchMu.Lock()
	defer c.watchMu.Unlock()
	for _, set := range c.watches {
		for w := range set.watches {
			w.signal()
			signal(w.leader)
		}
	}
}

func (w *Watch) signal() { signal(w.wake) }

// signal sends on a coalescing channel without waiting.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (c *Cluster) watchedChannels() []string {
	c.watchMu.Lock()
	defer c.watchMu.Unlock()
	out := make([]string, 0, len(c.watches))
	for ch := range c.watches {
		out = append(out, ch)
	}
	return out
}

func (c *Cluster) watched(channel string) bool {
	c.watchMu.Lock()
	defer c.watchMu.Unlock()
	return len(c.watches[channel].all()) > 0
}
