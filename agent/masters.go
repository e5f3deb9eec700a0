package agent

// tolerates is how many masters may be down, or sit out a quarantine,
// while the agent still grants: those beyond the quorum (n - (n/2+1)).
// One master tolerates none, nor do two; an even count tolerates no more
// than one master fewer would.
func (a *Agent) tolerates() int { return a.cluster.Size() - a.cluster.Quorum() }

// warnNoFaultTolerance says, at start, what an agent whose masters
// tolerate no failure gives up: with its only master (or either of two)
// down, every LOCK is answered NO_QUORUM and every hold is LOST; restarted
// empty, that master sits out its quarantine (one lease + drift) before it
// votes again, so for that long too the agent grants nothing. Holds stay
// safe through such a restart only because of that quarantine.
func (a *Agent) warnNoFaultTolerance() {
	if a.tolerates() > 0 {
		return
	}
	a.log.Warn("these masters tolerate no failure: with one of them down every LOCK gets NO_QUORUM and every hold is lost; "+
		"one restarted empty sits out its quarantine (one lease + drift), and the agent grants nothing meanwhile; "+
		"use three masters to tolerate one failure, five for two",
		"masters", a.cluster.Size(), "quorum", a.cluster.Quorum(), "quarantine", Quarantine(a.cfg.Lock))
}
