package telemetry

import "github.com/prometheus/client_golang/prometheus"

// observeMetrics are the series of observers (OBSERVE, * LEADER).
type observeMetrics struct {
	// Observers counts observations: sessions × names they observe.
	Observers prometheus.Gauge
	// LeaderPushes counts * LEADER lines pushed to observing sessions.
	LeaderPushes prometheus.Counter
}

func newObserveMetrics(f factory) observeMetrics {
	return observeMetrics{
		Observers:    f.gauge("observers", "Names observed by this agent's sessions (OBSERVE), counted per session."),
		LeaderPushes: f.counter("leader_pushes_total", "* LEADER lines pushed to observing sessions."),
	}
}

func (f factory) gauge(name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: name, Help: help})
	f.reg.MustRegister(g)
	return g
}
