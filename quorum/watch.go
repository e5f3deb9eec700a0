package quorum

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lock-agent/lock-agent/quorum/rules"
	"github.com/lock-agent/lock-agent/quorum/scripts"
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

// Want is what an agent whose waiter found a name held says on the name's
// channel (see Cluster.Wanted): whether that waiter wants the name shared
// (a shared holder is then not in its way), and how many requests for the
// name wait on that agent. A holder's agent reads it from its Watch
// (Watch.Wants) to tell holders that asked that they are wanted.
type Want struct {
	Shared bool
	Count  int
}

// message is want as instance says it: "wanted INSTANCE MODE COUNT".
func (w Want) message(instance string) string {
	mode := "exclusive"
	if w.Shared {
		mode = "shared"
	}
	return wantedPrefix + instance + " " + mode + " " + strconv.Itoa(max(w.Count, 1))
}

// parseWant reads a wanted message. One that names only its instance (an
// agent from before Want) wants the name exclusively, with one waiter.
func parseWant(message string) (instance string, w Want, ok bool) {
	f := strings.Fields(strings.TrimPrefix(message, wantedPrefix))
	if len(f) == 0 {
		return "", w, false
	}
	w = Want{Count: 1}
	if len(f) >= 3 {
		w.Shared = f[1] == "shared"
		if n, err := strconv.Atoi(f[2]); err == nil && n > 0 {
			w.Count = n
		}
	}
	return f[0], w, true
}

// Wanted tells the agents that hold name, if they watch the name, that
// this agent has requests waiting for it, as want says: an agent that
// passes a name among its local holders (see AcquireRequest.FenceBlock)
// then gives it up within its bounds, and one whose holder asked to be
// told (notify=wanted) tells it. It publishes on every connected master,
// in the background, and returns at once; a message can be lost (a master
// down, or the holder's subscription not yet made), so it is a hint,
// never a fact to be safe by.
func (c *Cluster) Wanted(name string, want Want) {
	if c.closed() {
		return
	}
	ch, message := c.keys.Channel(name), want.message(c.cfg.InstanceID)
	c.goBackground(func() {
		c.eachMaster(context.Background(), func(ctx context.Context, m *master) {
			m.publish(ctx, ch, message)
		})
	})
}

// heardWanted hands a wanted message of another agent to the name's
// watches: not a release, it must not wake waiters, whose attempts would
// fail and say so again. This agent's own messages are dropped.
func (c *Cluster) heardWanted(channel, message string) {
	instance, want, ok := parseWant(message)
	if !ok || instance == c.cfg.InstanceID {
		return
	}
	c.watchMu.Lock()
	defer c.watchMu.Unlock()
	for w := range c.watches[channel].all() {
		if w.wants == nil {
			w.wants = map[string]Want{}
		}
		w.wants[instance] = want
		signal(w.wanted)
	}
}

// Wants returns what other agents said of their waiters (see Want) since
// the last call, by agent instance, the latest of each; nil if nothing.
// Watch.Wanted receives when there is something.
func (w *Watch) Wants() map[string]Want {
	w.c.watchMu.Lock()
	defer w.c.watchMu.Unlock()
	wants := w.wants
	w.wants = nil
	return wants
}

// Held tells the agents that wait for name that a client of this agent
// holds it: a record they found in their way that this agent keeps as a
// cache (see Refusal.OnlyKept) is lent, not free, so a wait=0 try need
// not wait for its release. It publishes on every connected master, in
// the background, and returns at once; like Wanted it is a hint: a try
// that misses it answers BUSY after its bounded wait.
func (c *Cluster) Held(name string) {
	if c.closed() {
		return
	}
	ch, message := c.keys.Channel(name), heldPrefix+c.cfg.InstanceID
	c.goBackground(func() {
		c.eachMaster(context.Background(), func(ctx context.Context, m *master) {
			m.publish(ctx, ch, message)
		})
	})
}

// heardHeld signals the Held channel of the name's watches, but for this
// agent's own messages.
func (c *Cluster) heardHeld(channel, message string) {
	if strings.TrimPrefix(message, heldPrefix) == c.cfg.InstanceID {
		return
	}
	c.watchMu.Lock()
	defer c.watchMu.Unlock()
	for w := range c.watches[channel].all() {
		signal(w.held)
	}
}

// A hold's value, its fence check and the leader of a name, as leader
// election uses them (../shared/coordination.md §1, §2, §5): SetValue
// replaces a hold's value on a majority, Check asks whether a fence is a
// current holder's, and Leader reads who holds a name now. An agent that
// observes a name marks it (MarkObserved), so that a grant's record awaits
// its agent's word that the grant stood (see awaitingAgent), whose mark
// publishes leaderMessage, and reads Leader when its Watch's Leader
// channel says so.

// awaitingAgent is what a record's settled field holds from its grant of
// an observed name until the granting agent marks the grant's fence
// settled there (see scripts/lua/acquire.lua, markSettled): the masters run a grant
// before its agent decides it, and the agent may yet give it back (it lost
// the round to a master that granted after its deadline, a fence
// write-back failed, or it read the answers after the validity was used
// up). Records in step at one fence look settled all the same, and an
// observer that took them as a term would name a leader that never was.
// So a record awaiting its agent is a term only once some master marks it
// settled. Only observed names pay for the mark: a write to the granting
// masters, in the background, per grant.
const awaitingAgent = "pending"

// SetValue replaces the value of holder's hold of name on every master
// that has it, and wakes the name's observers anywhere. Like a release it
// goes to every connected master, down ones too, and lands in the
// background on those that answer late (see roundSpec.land), so that a
// paused master does not keep the old value. It returns nil once a
// majority replaced it, else a RoundError of ErrNoQuorum: the value is
// then the new one on some masters and the old one on others (Who reports
// the one most of them have), until a SET lands.
func (c *Cluster) SetValue(ctx context.Context, name, holder, value string) error {
	if c.closed() {
		return ErrClosed
	}
	r, never := c.vote(ctx, roundSpec{op: OpSet, script: scripts.SetValue, keys: []string{c.keys.Holder(name, holder)},
		args: []string{value, c.keys.Channel(name)}, land: true,
		judge: func(a answer) (int, bool, error) {
			v, err := a.res.AsInt64()
			return 0, err == nil && v == 1, err
		}})
	if err := c.majorityErr(r, never); err != nil {
		return err
	}
	return nil
}

// Check says whether fence is the fence of a current holder of name: true
// when a majority of the masters (a quorum of them, at least, answered)
// records a live holder with that fence, false when enough answered that
// no majority can. It only reads.
//
// Masters that answered may disagree while the ones that did not could
// tip it either way: a change is landing on them one after the other (a
// hand-over's retag, a release, a grant's write-back; with one master of
// three paused, the other two are the whole majority). That is not a
// majority unreachable, so Check reads again, soon and then less often
// (checkPace), for as long as they disagree, within checkPatience: a
// change lands within a round, and only a change that stopped half-way
// (its agent cut off) keeps them apart longer, until its lease ends. Then
// it is ERR NO_QUORUM, as when too few answer.
func (c *Cluster) Check(ctx context.Context, name string, fence int64) (bool, error) {
	if c.closed() {
		return false, ErrClosed
	}
	// It reads every answer until a majority agrees either way: a round
	// decided as soon as the current holder could not be on a majority
	// (the way a grant is lost) counted a master it had not read as
	// against, though with it a majority might record the holder.
	var yes, no int
	spec := roundSpec{op: OpWho, script: scripts.Check, keys: []string{c.keys.Set(name)},
		args: []string{c.keys.HolderPrefix(name), strconv.FormatInt(fence, 10)}, early: true, whole: true,
		judge: func(a answer) (int, bool, error) {
			v, err := a.res.AsInt64()
			switch {
			case err != nil:
			case v == 1:
				yes++
			default:
				no++
			}
			return 0, err == nil && v == 1, err
		},
		enough: func() bool { return yes >= c.quorum || no >= c.quorum }}
	var waited time.Duration
	for pace := checkPace; ; pace = min(2*pace, 16*checkPace) {
		yes, no = 0, 0
		r, never := c.vote(ctx, spec)
		if never != nil {
			return false, never.Err()
		}
		current, known := rules.CheckOutcome(len(c.masters), c.quorum, r.yes(), r.failed)
		if known {
			return current, nil
		}
		if yes == 0 || no == 0 || waited+pace > c.checkPatience() {
			return false, c.noQuorumErr(r)
		}
		t := c.clock.NewTimer(pace)
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return false, c.noQuorumErr(r)
		}
		waited += pace
	}
}

// checkPace is how soon Check reads again masters that disagree (see
// Check); it doubles each time, to 16 times this.
const checkPace = time.Millisecond

// checkPatience is how long Check reads again masters that disagree: four
// master timeouts (200ms by default), a few rounds of the change it meets.
func (c *Cluster) checkPatience() time.Duration { return 4 * c.cfg.MasterTimeout }

// MarkObserved marks name observed on every master for lease (a key with
// that PX, see scripts/lua/acquire.lua), so that a grant of it awaits its agent's
// mark, which publishes leaderMessage (see awaitingAgent). The observing
// agent renews it well within lease while it observes, and lets it expire
// after. It returns on how many masters the mark landed.
func (c *Cluster) MarkObserved(ctx context.Context, name string, lease time.Duration) int {
	if c.closed() {
		return 0
	}
	key := c.keys.Observed(name)
	var n atomic.Int32
	c.eachMaster(ctx, func(ctx context.Context, m *master) {
		if cl := m.conn(laneRounds); cl != nil && cl.Do(ctx, cl.B().Set().Key(key).Value("1").Px(lease).Build()).Error() == nil {
			n.Add(1)
		}
	})
	return int(n.Load())
}

// Leader returns the leader of name as a majority of the masters records
// it (see LeaderOf), and false when nobody holds it: when no holder can be
// on a majority, the masters that did not answer counted in. A holder that
// the answers show on fewer than a majority, but that the masters that did
// not answer could make a majority (one of its masters is paused), is
// ErrUnsettled: "none" would be false while it holds. Unlike Who, it takes
// a holder's fence F only once it is settled: a grant's record carries
// its own master's fence until the grant's fence, the highest of the
// granting majority's, is written back to them (see settleFence), so a
// fence that a majority shows meanwhile may be a term that never was. F
// is settled when a record marks it settled (the granting agent does once
// the grant stood, if the name was observed or some master did not grant
// it: see markSettled). A holder that a record shows awaiting that mark
// (see awaitingAgent) is not settled until then, lenient or not. Else F is
// settled when, every master having answered, every one that answered
// with the holder records F and every one that answered without it (it
// refused the grant, or has not run it yet) would give a grant no fence
// above F. A master that did not answer may have granted a higher fence
// that the grant took, so without a mark F is not settled then. While it
// is not, Leader returns ErrUnsettled (an UnsettledError that names the
// holder): read again shortly. With lenient, a fence that a majority
// records will do: a master that missed a write-back (it was paused past
// its deadline) keeps another fence in its record until the hold ends,
// and a caller that found the holder unsettled for longer than a grant
// can take takes the majority's.
//
// It waits for a slow master only while the answers so far do not decide
// (a holder awaiting its agent's mark decides: an UnsettledError): a master
// that stopped answering, not yet known down, must not hold up every read
// for a round's deadline.
func (c *Cluster) Leader(ctx context.Context, name string, lenient bool) (Holder, bool, error) {
	read, err := c.readHolders(ctx, name, true, func(read holdersRead) bool {
		_, _, err := c.leaderIn(read, lenient)
		var u *UnsettledError
		return len(read.answers) >= c.quorum && (err == nil || errors.As(err, &u) && u.Awaiting)
	})
	if err != nil {
		return Holder{}, false, err
	}
	return c.leaderIn(read, lenient)
}

// leaderIn is the leader that read's answers show (see Leader).
func (c *Cluster) leaderIn(read holdersRead, lenient bool) (Holder, bool, error) {
	var holders []Holder
	unheard := len(c.masters) - len(read.answers)
	for _, v := range read.votes {
		switch {
		case v.count+unheard < c.quorum:
			continue // not on a majority: no holder (any more, or yet)
		case v.isCached():
			continue // kept by its agent for a client to come: it leads nothing (see MarkCached)
		case v.settled == 0 && v.awaiting > 0:
			// Its grant may not stand: only its agent can tell, and its
			// mark will publish. No answer still to come can tell.
			return Holder{}, false, &UnsettledError{Holder: v.id, Awaiting: true}
		case v.count < c.quorum:
			// On a majority, perhaps: the masters that did not answer may
			// hold it. Neither it nor "none" is known.
			return Holder{}, false, &UnsettledError{Holder: v.id}
		}
		fence, ok := read.settled(v, c.quorum, unheard, lenient)
		if !ok {
			return Holder{}, false, &UnsettledError{Holder: v.id}
		}
		value, ok := v.settledValue(c.quorum, lenient)
		if !ok {
			return Holder{}, false, &UnsettledError{Holder: v.id}
		}
		r := v.recordAt(fence)
		r.Fence, r.Who.Value = fence, value
		holders = append(holders, Holder{ID: v.id, Record: r})
	}
	h, ok := LeaderOf(holders)
	return h, ok, nil
}

// settledValue is v's value once as many masters as a quorum record it:
// a SET (a proclaim) is answered once a quorum has it, so the value a
// quorum of the answers records is the last one answered. Two answers that
// differ (a master the SET has not reached yet beside one it has) tell
// nothing; the first's was pushed to observers as a change, the previous
// value after the new one (the asyncio client's campaign test, beside two
// CPU hogs). With lenient, the value most of them record will do.
func (v *holderVotes) settledValue(quorum int, lenient bool) (string, bool) {
	best := v.value()
	return best, lenient || v.values[best] >= quorum
}

// settled is v's settled fence, if it is (see Leader), with unheard
// masters that did not answer.
func (read holdersRead) settled(v *holderVotes, quorum, unheard int, lenient bool) (int64, bool) {
	if v.settled != 0 {
		return v.settled, true // its granting agent marked it
	}
	for f, n := range v.fences {
		switch {
		case lenient && n >= quorum:
			return f, true
		case unheard > 0 || n < v.count:
			continue
		}
		for _, m := range read.answers {
			if !m.holders[v.id] && m.next > f {
				return 0, false
			}
		}
		return f, true
	}
	return 0, false
}

// LeaderOf picks the leader among a name's holders: the holder with the
// lowest fence, which for a lock is its one holder, and for a name held
// shared or as a semaphore the one that has held it longest (fences grow
// with every grant, so the leader's fence never goes back while holders
// come and go). False when there is none.
func LeaderOf(holders []Holder) (Holder, bool) {
	if len(holders) == 0 {
		return Holder{}, false
	}
	best := holders[0]
	for _, h := range holders[1:] {
		if h.Record.Fence < best.Record.Fence {
			best = h
		}
	}
	return best, true
}
