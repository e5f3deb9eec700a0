package quorum

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/lock-agent/lock-agent/quorum/rules"
	"github.com/lock-agent/lock-agent/quorum/scripts"
)

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
func (c *Cluster) Check(ctx context.Context, name string, fence int64) (bool, error) {
	if c.closed() {
		return false, ErrClosed
	}
	r, never := c.vote(ctx, roundSpec{op: OpWho, script: scripts.Check, keys: []string{c.keys.Set(name)},
		args: []string{c.keys.HolderPrefix(name), strconv.FormatInt(fence, 10)}, early: true,
		judge: func(a answer) (int, bool, error) {
			v, err := a.res.AsInt64()
			return 0, err == nil && v == 1, err
		}})
	if never != nil {
		return false, never.Err()
	}
	current, known := rules.CheckOutcome(len(c.masters), c.quorum, r.yes(), r.failed)
	if !known {
		return false, c.noQuorumErr(r)
	}
	return current, nil
}

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
