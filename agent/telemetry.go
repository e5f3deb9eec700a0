package agent

import (
	"net/http"
	"time"

	"github.com/lock-agent/lock-agent/agent/systemd"
	"github.com/lock-agent/lock-agent/agent/telemetry"
	"github.com/lock-agent/lock-agent/internal/buildinfo"
	"github.com/lock-agent/lock-agent/protocol"
	"github.com/lock-agent/lock-agent/quorum"
	"github.com/lock-agent/lock-agent/renewal"
)

// How often each of the agent's loops proves it turns, and how long a loop
// may stay silent before it counts as wedged (see telemetry.Health). These
// are variables so tests can shorten them before New.
var (
	healthBeat  = time.Second
	healthStale = 3 * time.Second
)

// metrics records the agent's records (waiters, holds) in telemetry's
// series. The series themselves, their names and labels, are telemetry's.
type metrics struct{ *telemetry.Metrics }

func newMetrics(masters []quorum.MasterConfig) *metrics {
	return &metrics{telemetry.NewMetrics(buildinfo.Get(), masters)}
}

func (m *metrics) mode(mode protocol.Mode) *telemetry.ModeMetrics { return m.Mode(mode) }

// lockAnswered records the answer to a LOCK that went through a queue.
func (m *metrics) lockAnswered(w *waiter, r result) {
	m.LockAnswered(w.req.Mode, w.joined, r.count, r.err)
}

// noQuorumAnswered counts an ERR NO_QUORUM answer to verb (extend or who).
func (m *metrics) noQuorumAnswered(verb string) { m.NoQuorumAnswered(verb) }

func (m *metrics) holdStarted(h *hold) { m.HoldStarted(h.gaugeMode) }

// holdDowngraded moves a hold from the exclusive holds to the shared ones.
// Agent.mu is held.
func (m *metrics) holdDowngraded(h *hold) {
	m.HoldDowngraded(h.gaugeMode)
	h.gaugeMode = protocol.Shared
}

func (m *metrics) holdEnded(h *hold) { m.HoldEnded(h.gaugeMode, h.granted) }

func (m *metrics) lost(reason renewal.Reason) { m.Lost(reason) }

func (m *metrics) cachedGrant()  { m.CachedGrants.Inc() }
func (m *metrics) cacheGivenUp() { m.CacheGiveUps.Inc() }

// MetricsHandler serves the agent's metrics in the Prometheus text format.
// The agent keeps its metrics whether or not anything serves them.
func (a *Agent) MetricsHandler() http.Handler { return a.metrics.Handler() }

// Healthy returns nil if the agent's own loops (the accept loop, the
// renewal watchdog) all proved they turn within the last few seconds, else
// an error naming the ones that did not. It is what drives systemd's
// WATCHDOG=1 pings.
func (a *Agent) Healthy() error { return a.health.Check() }

// Stats returns a snapshot of the masters' states and the agent's counts.
func (a *Agent) Stats() systemd.Stats {
	c := a.counts()
	s := systemd.Stats{Masters: a.cluster.Size(), Quorum: a.cluster.Quorum(), Sessions: c.Sessions, Holds: c.Holds, Waiters: c.Waiters}
	for _, m := range a.cluster.Status() {
		if m.State == quorum.StateUp {
			s.MastersUp++
		}
	}
	return s
}
