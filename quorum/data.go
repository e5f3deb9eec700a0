package quorum

import "errors"

// A quarantined master holds nothing: it is new, or it lost its data
// (restarted empty, flushed, restored from a snapshot, replaced). The
// advice differs, and one of the two is dangerous to give for the other:
// `lock-agent bootstrap` spares a new deployment its first quarantine,
// but a master that lost its data and is bootstrapped votes at once, and
// can grant a name that a forgotten hold still protects. So an agent says
// "new" only when it is sure of it, as far as the masters can say: every
// master of the deployment was met with no marker (each marker was
// planted on a master that had none, or there is none yet) and none ever
// voted. It says "lost" when it knows the deployment served: it saw this
// master or another with an earlier epoch, or saw a master vote (a marker
// whose quarantine was over, or a bootstrap's). Otherwise it cannot tell,
// and says so; the advice is then the safe one (wait).

// Data is what an agent can tell of why a quarantined master holds nothing.
type Data string

// The Data an agent tells.
const (
	DataNone    Data = ""        // not quarantined
	DataNew     Data = "new"     // a new deployment: no master had a marker, none voted
	DataLost    Data = "lost"    // it lost its data, or is new to a deployment that served
	DataUnknown Data = "unknown" // new, or lost its data: the agent cannot tell
	DataChanged Data = "changed" // the settings command quarantined it (how=change): it kept its data
)

// MarkerFacts is what an agent's probes saw of one master's marker, for
// ClassifyData.
type MarkerFacts struct {
	// Probed: a probe of this agent's read its marker (or found none).
	Probed bool
	// EpochChanged: the agent saw it with another epoch (or a marker,
	// where it now has none) since it last voted.
	EpochChanged bool
	// Fresh: it has no marker, or one the gate planted on it while it had
	// none (how=plant).
	Fresh bool
	// Changed: its marker was last written by the settings command
	// (how=change), whose quarantine lets the holds of the old settings end.
	Changed bool
}

// MasterData is what an agent tells of one quarantined master (self),
// deployment being ClassifyData's answer: a master the settings command
// quarantined kept its data, whatever the deployment's story.
func MasterData(self MarkerFacts, deployment Data) Data {
	if self.Changed {
		return DataChanged
	}
	return deployment
}

// ClassifyData says what an agent knows of why a quarantined master holds
// nothing, from what its probes saw of every master of the deployment
// (masters) and whether it ever saw one of them vote (established). It is
// the same for every quarantined master: it is the deployment's story.
func ClassifyData(masters []MarkerFacts, established bool) Data {
	if established {
		return DataLost
	}
	for _, f := range masters {
		if f.EpochChanged {
			return DataLost
		}
	}
	for _, f := range masters {
		if !f.Probed || !f.Fresh {
			return DataUnknown
		}
	}
	return DataNew
}

// data is MasterData of each of c's masters, as the probes last saw their
// markers. A master that is a Redis Cluster has a marker per slot: the
// agent does not tell, for it or for the others, and says DataUnknown
// unless it knows that the deployment served.
func (c *Cluster) data() []Data {
	facts := make([]MarkerFacts, len(c.masters))
	for i, m := range c.masters {
		m.mu.RLock()
		facts[i] = MarkerFacts{Probed: m.probed && !m.t.perSlot(), EpochChanged: m.epochChanged, Fresh: m.fresh, Changed: m.changed}
		m.mu.RUnlock()
	}
	deployment := ClassifyData(facts, c.established.Load())
	out := make([]Data, len(facts))
	for i, f := range facts {
		out[i] = MasterData(f, deployment)
	}
	return out
}

// noteMarkerFacts records, after a probe that answered mk, what
// ClassifyData needs of this master; lostData says the probe found another
// epoch than the last one seen. A master that votes again is no longer
// "changed", and shows that the deployment serves. m.mu is held.
func (m *master) noteMarkerFactsLocked(mk markerReply, lostData bool) {
	m.probed = true
	m.fresh = errors.Is(mk.refusal, ErrUnplanted) || mk.how == "plant"
	m.changed = mk.how == "change"
	if lostData {
		m.epochChanged = true
	}
	if mk.left == 0 && mk.refusal == nil {
		m.epochChanged = false
		m.cluster.established.Store(true)
	}
}

// Advice is what to do about a quarantined master, given what the agent
// can tell (d): the only advice that is safe whatever happened. Only a new
// deployment is told of lock-agent bootstrap (for the next one: the markers
// planted now make it do nothing); a master that lost its data, or that
// may have, is to be waited out, never bootstrapped.
func (d Data) Advice() string {
	switch d {
	case DataNew:
		return "a new deployment (no master had a marker; none has voted yet): wait; next time, lock-agent bootstrap before the first agent starts spares this wait"
	case DataLost:
		return "it lost its data (restarted empty, flushed or restored) or joined a deployment that served: wait, every hold it may have forgotten must end first; never lock-agent bootstrap it"
	case DataChanged:
		return "the cluster's settings were changed (lock-agent settings): wait, every hold granted under the old ones must end first; never lock-agent bootstrap it"
	}
	return "new or lost its data (this agent cannot tell): wait; never lock-agent bootstrap a master that may have served locks"
}
