package quorum

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lock-agent/lock-agent/quorum/hashslot"
	"github.com/redis/rueidis"
)

// A cluster master's side of the watches (see shards.go). A Redis Cluster
// delivers a PUBLISH on every node, over the cluster bus: a cost on every
// node at every release. So on such a master the scripts publish with
// SPUBLISH (scripts.Script.Sharded), which reaches only the subscribers on the
// shard that serves the channel's slot, and the master keeps one pub/sub
// connection per shard primary, subscribed (SSUBSCRIBE) to the watched
// channels of that shard's slots. A channel must follow its slot: when the
// probe sees the slots move, or a server drops a channel (it does when the
// slot leaves it), the channel is subscribed again at its slot's owner, and
// its watches look again (Recheck): what was published meanwhile is lost.

// shardSubs is a cluster master's shard subscriptions.
type shardSubs struct {
	m *master
	// mu is held across a subscription's round trip, as master.subMu is,
	// and guards conns and placed.
	mu    sync.Mutex
	conns map[string]*shardConn // by the primary's address
	// placed is the probe's topology (shardSet.topo) the channels were
	// last placed by.
	placed  string
	stopped bool // the master stops: no new connection
	// dirty asks the loop to place the channels again although the
	// topology did not change: a connection ended, a subscription failed,
	// a server dropped a channel, or a channel's slot had no known owner.
	// A failure of the loop's own waits for its next turn (a probe
	// interval), so that a shard that is down is not dialled in a spin;
	// what a connection reports wakes it at once (kick).
	dirty atomic.Bool
	kick  chan struct{}
}

// shardConn is one dedicated pub/sub connection to a shard primary.
type shardConn struct {
	addr  string
	dc    rueidis.DedicatedClient
	chans map[string]struct{} // subscribed and confirmed; guarded by shardSubs.mu
	ended atomic.Bool
	// closing says the agent closed it: its end is no news to report.
	closing atomic.Bool

	// dropped are the channels the server unsubscribed on its own (their
	// slot moved), and ours counts the SUNSUBSCRIBEs sent whose answer
	// (the same push) is yet to come: a stale one would drop the channel
	// subscribed again since. Guarded by dropMu, not shardSubs.mu: the
	// connection's hook writes them, and must not wait.
	dropMu  sync.Mutex
	dropped []string
	ours    map[string]int
}

func newShardSubs(m *master) *shardSubs {
	return &shardSubs{m: m, conns: map[string]*shardConn{}, kick: make(chan struct{}, 1)}
}

// loop places the watched channels on the shards until ctx ends: at once
// when a connection says something changed, else at each probe interval
// if the probe saw the slots move.
func (s *shardSubs) loop(ctx context.Context) {
	select {
	case <-s.m.connected:
	case <-ctx.Done():
		return
	}
	defer s.closeAll()
	for ctx.Err() == nil {
		s.place(ctx)
		// Paced with the probe, in real time as the probe is: not lease logic.
		t := time.NewTimer(s.m.cluster.cfg.ProbeInterval)
		select {
		case <-ctx.Done():
		case <-t.C:
		case <-s.kick:
		}
		t.Stop()
	}
}

// again asks the loop to place the channels again, at once.
func (s *shardSubs) again() {
	s.dirty.Store(true)
	signal(s.kick)
}

// close closes sc on the agent's behalf.
func (sc *shardConn) close() {
	sc.closing.Store(true)
	sc.dc.Close()
}

// place subscribes each watched channel at its slot's owner, moving those
// whose slot moved, and confirms each one it subscribed (its watches look
// again).
func (s *shardSubs) place(ctx context.Context) {
	topo, dirty := s.m.shards.topology(), s.dirty.Swap(false)
	if topo == "" || (topo == s.placed && !dirty) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.placed = topo
	s.forgetDropped()
	carried := s.unplaceMoved(ctx)
	for _, ch := range s.m.cluster.watchedChannels() {
		if _, ok := carried[ch]; ok {
			continue
		}
		if s.subscribeLocked(ctx, ch) {
			s.m.cluster.confirm(ch)
		}
	}
}

// forgetDropped closes the connections that ended and takes from the
// others the channels their server dropped.
func (s *shardSubs) forgetDropped() {
	for addr, sc := range s.conns {
		if sc.ended.Load() {
			sc.close()
			delete(s.conns, addr)
			continue
		}
		sc.dropMu.Lock()
		for _, ch := range sc.dropped {
			delete(sc.chans, ch)
		}
		sc.dropped = nil
		sc.dropMu.Unlock()
	}
}

// unplaceMoved unsubscribes, on each connection, the channels whose slot
// another shard now serves or that no one watches any more, and returns
// the channels left where they belong.
func (s *shardSubs) unplaceMoved(ctx context.Context) map[string]struct{} {
	carried := map[string]struct{}{}
	for _, sc := range s.conns {
		for ch := range sc.chans {
			if s.m.shards.ownerOf(hashslot.Of(ch)) == sc.addr && s.m.cluster.watched(ch) {
				carried[ch] = struct{}{}
				continue
			}
			s.sunsubscribe(ctx, sc, ch)
		}
	}
	return carried
}

// subscribe adds one channel at its slot's owner and says whether it was
// confirmed; if not, the loop places it later and confirms it then.
func (s *shardSubs) subscribe(ctx context.Context, ch string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.m.cluster.watched(ch) {
		return false
	}
	return s.subscribeLocked(ctx, ch)
}

func (s *shardSubs) subscribeLocked(ctx context.Context, ch string) bool {
	addr := s.m.shards.ownerOf(hashslot.Of(ch))
	sc := s.open(addr)
	if sc == nil {
		s.dirty.Store(true) // the slot's owner is not known or not reached yet
		return false
	}
	if _, ok := sc.chans[ch]; ok {
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, 4*s.m.cluster.cfg.MasterTimeout)
	defer cancel()
	if err := sc.dc.Do(ctx, sc.dc.B().Ssubscribe().Channel(ch).Build()).Error(); err != nil {
		s.m.log.Debug("shard subscribe failed: placing it again", "shard", addr, "channel", ch, "error", err)
		s.failed(sc, err)
		return false
	}
	sc.chans[ch] = struct{}{}
	return true
}

// unsubscribe drops a channel that no watcher wants any more (see
// master.unsubscribe).
func (s *shardSubs) unsubscribe(ctx context.Context, ch string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m.cluster.watched(ch) {
		return
	}
	for _, sc := range s.conns {
		if _, ok := sc.chans[ch]; ok {
			s.sunsubscribe(ctx, sc, ch)
		}
	}
}

// sunsubscribe drops ch from sc. Its deadline counts from its turn (see
// master.unsubscribe).
func (s *shardSubs) sunsubscribe(ctx context.Context, sc *shardConn, ch string) {
	delete(sc.chans, ch)
	sc.dropMu.Lock()
	sc.ours[ch]++
	sc.dropMu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 4*s.m.cluster.cfg.MasterTimeout)
	defer cancel()
	if err := sc.dc.Do(ctx, sc.dc.B().Sunsubscribe().Channel(ch).Build()).Error(); err != nil {
		s.m.log.Debug("shard unsubscribe failed", "shard", sc.addr, "channel", ch, "error", err)
		s.failed(sc, err)
	}
}

// failed handles a subscription's error on sc: a server's refusal (MOVED:
// the probe has not seen the slot move yet) is tried again by the loop;
// any other error may leave the connection in an unknown state, so it is
// made anew with the channels watched.
func (s *shardSubs) failed(sc *shardConn, err error) {
	if _, refused := rueidis.IsRedisErr(err); !refused {
		sc.close()
		delete(s.conns, sc.addr)
	}
	s.dirty.Store(true)
}

// open returns the live connection to the primary at addr, making it if
// need be; nil if addr is "" or the client does not know the node yet.
func (s *shardSubs) open(addr string) *shardConn {
	if sc := s.conns[addr]; sc != nil && !sc.ended.Load() {
		return sc
	}
	c := s.m.getClient()
	if addr == "" || c == nil || s.stopped {
		return nil
	}
	node, ok := c.Nodes()[addr]
	if !ok {
		return nil
	}
	dc, _ := node.Dedicate()
	sc := &shardConn{addr: addr, dc: dc, chans: map[string]struct{}{}, ours: map[string]int{}}
	wait := dc.SetPubSubHooks(rueidis.PubSubHooks{
		OnMessage:      func(msg rueidis.PubSubMessage) { s.m.cluster.onMessage(msg.Channel, msg.Message) },
		OnSubscription: func(sub rueidis.PubSubSubscription) { s.onSubscription(sc, sub) },
	})
	go func() {
		err := <-wait
		sc.ended.Store(true)
		if !sc.closing.Load() {
			s.m.log.Debug("shard subscriber ended", "shard", addr, "error", err)
			s.again()
		}
	}()
	s.conns[addr] = sc
	return sc
}

// onSubscription notes a channel the server unsubscribed sc from on its
// own.
func (s *shardSubs) onSubscription(sc *shardConn, sub rueidis.PubSubSubscription) {
	if sub.Kind != "sunsubscribe" {
		return
	}
	sc.dropMu.Lock()
	defer sc.dropMu.Unlock()
	if sc.ours[sub.Channel] > 0 {
		if sc.ours[sub.Channel]--; sc.ours[sub.Channel] == 0 {
			delete(sc.ours, sub.Channel)
		}
		return
	}
	sc.dropped = append(sc.dropped, sub.Channel)
	s.again()
}

// closeAll closes every connection as the master stops. Closing one may
// wait up to a second for a paused server: not in the stop's way.
func (s *shardSubs) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	for addr, sc := range s.conns {
		sc.closing.Store(true)
		go sc.dc.Close()
		delete(s.conns, addr)
	}
}

// ownerOf is the address of the primary that serves slot as the probe last
// saw it; "" if none is known.
func (s *shardSet) ownerOf(slot int) string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if i := s.owner[slot]; i >= 0 && int(i) < len(s.list) {
		return s.list[i].addr
	}
	return ""
}

// topology is the slots as the probe last read them ("" before).
func (s *shardSet) topology() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.topo
}

// publish publishes message on channel on m from outside a script: SPUBLISH
// on a cluster master (see above), PUBLISH on a standalone one.
func (m *master) publish(ctx context.Context, channel, message string) {
	if c := m.conn(laneRounds); c != nil {
		m.t.publishOn(ctx, c, channel, message)
	}
}
