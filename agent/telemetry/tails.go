package telemetry

import "github.com/prometheus/client_golang/prometheus"

// tailSeries are the series of tails (delay=, min_hold=) and REVOKE.
type tailSeries struct {
	revocations, tails prometheus.Counter
}

func newTailSeries(f factory) tailSeries {
	return tailSeries{
		revocations: f.counter("revocations_total", "Holds that REVOKE requests to this agent revoked, on any agent."),
		tails:       f.counter("tails_total", "Holds of this agent's clients that ended leaving their name unavailable for a while (delay= after an unclean end, or min_hold=)."),
	}
}

// Revoked counts n holds a REVOKE revoked.
func (m *Metrics) Revoked(n int) { m.tails.revocations.Add(float64(n)) }

// TailBegun counts a hold whose end left a tail.
func (m *Metrics) TailBegun() { m.tails.tails.Inc() }
