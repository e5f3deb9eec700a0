package quorum

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// The tail horizon: how a master that lost its data sits out every tail it
// forgot (issue 18).
//
// A master's quarantine is one lease because every record older than that
// is renewed, and so re-created by the watchdog's repair, by an agent that
// is alive. A tail (see lua/tails.lua) is renewed by nobody: its hold is over,
// and its agent is often the one that died. So a master that restarted
// empty and votes again after one lease lacks every tail it had; if a
// second master then restarts empty, the two grant the name while the
// delay (the min_hold) still stands, though no more than one master ever
// failed at a time.
//
// So every master keeps a horizon: its marker's field tail_until, the
// master's ms by which every tail it keeps, or may come to keep, has ended.
// Every script that gives a record a tail's PX (a grant or a repair with a
// tail, a tailed renewal, an end that leaves a tail) raises it to that PX
// (tail_mark). A record's PX already covers every tail it can become: a
// dead agent's record ends lease + delay after its last renewal, an end
// before then leaves a delay that ends sooner, and the PX never falls short
// of min_until. Holds without a tail never touch it.
//
// A marker the gate plants (the master lost its data) says tails=pending.
// The health probe of any agent that finds a master quarantined and pending
// asks the other masters for their horizons (lua/horizon.lua: the horizon, or
// the quarantine left, whichever is later: a quarantined master stands for
// every record it forgot until then) and lengthens the quarantine to the
// latest (lua/settle_tails.lua), which clears pending. It needs the answers of
// enough masters that are not pending themselves to meet every majority of
// the others (see settleHorizon): a tail stood on a majority, so on all of
// it but the lost master, and one of those answers. Meanwhile the master is
// quarantined for its lease anyway; every agent probes it every probe
// interval, so the horizon is settled long before that ends.
//
// Why not the other ways: re-creating tails from the agents that know them
// (as the watchdog repairs holds) misses the tails of the agents that
// died, which are the ones delay= is for; and a quarantine as long as the
// longest possible tail (24 hours of min_hold) for every lost master would
// cost everyone for the sake of names that rarely have one. With the
// horizon a quarantine is one lease unless tails stand, and as long as the
// longest of them when they do.
//
// What it does not do: if no agent settles a pending master before its
// lease-long quarantine ends (no agent reaches it, or enough other masters,
// for a whole lease), the master votes without its tails, as before; and
// when more than a minority of the masters lost their data at once (a fault
// beyond what a majority survives), it is settled with what the masters
// that kept theirs know.

// horizon is one master's answer to lua/horizon.lua.
type horizon struct {
	answered bool
	epoch    string
	// lost says it lost its data and was not settled: it knows nothing of
	// the tails it had.
	lost bool
	// left is how long until its tails and its quarantine have ended.
	left time.Duration
}

// errHorizonReply is a horizon reply of the wrong shape.
var errHorizonReply = errors.New("unexpected horizon reply")

// horizon asks m for its tail horizon on connection l: the probe's for the
// master it probes, the rounds' for the others (their own probes use
// theirs).
func (m *master) horizon(ctx context.Context, l lane) horizon {
	if m.shards != nil {
		return m.clusterHorizon(ctx, l)
	}
	return readHorizon(m.evalOn(ctx, l, horizonScript, []string{m.cluster.markerKey()}, nil))
}

// readHorizon reads a lua/horizon.lua reply.
func readHorizon(r rueidis.RedisResult) horizon {
	vals, err := r.ToArray()
	if err != nil || len(vals) != 3 {
		return horizon{}
	}
	epoch, err1 := vals[0].ToString()
	lost, err2 := vals[1].AsInt64()
	left, err3 := vals[2].AsInt64()
	if err := errors.Join(err1, err2, err3); err != nil {
		return horizon{}
	}
	return horizon{answered: true, epoch: epoch, lost: lost == 1, left: time.Duration(left) * time.Millisecond}
}

// settleTails is the probe's part in the tail horizon (see above): if m is
// pending, it asks the other masters for their horizons and, when
// settleHorizon says so, lengthens m's quarantine to the latest, with the
// drift allowance. Once m's epoch is settled it costs nothing.
func (m *master) settleTails(ctx context.Context) {
	c := m.cluster
	m.mu.RLock()
	settled := m.settledEpoch == m.epoch
	m.mu.RUnlock()
	if settled {
		return
	}
	own := m.horizon(ctx, laneHealth)
	if own.answered && !own.lost {
		m.noteSettled(own.epoch) // planted before tails were pending, or settled by another agent
	}
	if !own.answered || !own.lost || own.epoch == "" {
		return
	}
	others := c.otherHorizons(ctx, m.index)
	left, settle, complete := settleHorizon(len(c.masters), others)
	if !settle {
		return
	}
	ms := left + time.Duration(float64(left)*c.cfg.DriftFactor) + 10*time.Millisecond
	quarantine, err := m.evalOn(ctx, laneHealth, settleTailsScript, []string{c.markerKey()},
		[]string{own.epoch, strconv.FormatInt(ms.Milliseconds(), 10)}).AsInt64()
	if err != nil || quarantine < 0 {
		return
	}
	m.noteSettled(own.epoch)
	m.quarantined(time.Duration(quarantine) * time.Millisecond)
	if !complete {
		m.log.Warn("master lost its data while too many others did too: its tails may end early", "quarantine_ms", quarantine)
		return
	}
	m.log.Info("master that lost its data sits out the tails the others keep", "quarantine_ms", quarantine)
}

// noteSettled records that epoch's tails were settled on m.
func (m *master) noteSettled(epoch string) {
	m.mu.Lock()
	m.settledEpoch = epoch
	m.mu.Unlock()
}

// otherHorizons asks every master but skip for its horizon, at once.
func (c *Cluster) otherHorizons(ctx context.Context, skip int) []horizon {
	out := make([]horizon, 0, len(c.masters)-1)
	answers := make(chan horizon, len(c.masters))
	for i, m := range c.masters {
		if i != skip {
			go func() { answers <- m.horizon(ctx, laneRounds) }()
		}
	}
	for range len(c.masters) - 1 {
		out = append(out, <-answers)
	}
	return out
}
