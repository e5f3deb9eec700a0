// Package telemetry is what the agent tells about itself: its Prometheus
// series and the listener that serves them, and the liveness of its own
// loops (which drives systemd's watchdog). It knows nothing of the agent's
// records: the agent passes it modes, times and errors.
package telemetry

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/lock-agent/lock-agent/internal/buildinfo"
	"github.com/lock-agent/lock-agent/protocol"
	"github.com/lock-agent/lock-agent/quorum"
	"github.com/lock-agent/lock-agent/renewal"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics is the agent's Prometheus registry and the series it updates.
//
// Every label value comes from a fixed set (modes, reasons, verbs, ops,
// states), from the config (master names) or from a Redis Cluster master's
// topology (its shards' addresses): never from a request. No lock
// name, owner or pid may become a label value, or the number of series
// would grow with the traffic. Every series is created here, up front, so
// that recording an event on the request path is an atomic add, with no
// lookup by label and no allocation.
type Metrics struct {
	registry *prometheus.Registry
	byMode   map[protocol.Mode]*ModeMetrics // read-only once built
	noQuorum map[string]prometheus.Counter  // by verb: lock, extend, who
	losses   map[renewal.Reason]prometheus.Counter

	masterOp         [quorum.NumOps][]prometheus.Observer // by op, then master index
	quarantines      []prometheus.Counter                 // by master index
	fenceSettles     prometheus.Counter
	fenceWriteBacks  prometheus.Counter
	renewalBatch     prometheus.Observer
	renewalRoundTime prometheus.Observer
	tails            tailSeries
	// WantedPushes counts the * WANTED pushes (notify=wanted).
	WantedPushes   prometheus.Counter
	observeMetrics // see observe.go
	cacheSeries    // see cache.go
}

// ModeMetrics are the series of one lock mode.
type ModeMetrics struct {
	Holds, Waiters          prometheus.Gauge
	Grants, Reentries, Busy prometheus.Counter
	wait                    [numOutcomes]prometheus.Observer
	held                    prometheus.Observer
}

// outcome is how a LOCK's wait ended, for lock_agent_wait_seconds.
type outcome int

const (
	outcomeGranted outcome = iota
	outcomeBusy
	outcomeFailed // any error reply: NO_QUORUM, CANCELLED, SHUTTING_DOWN
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"granted", "busy", "failed"}

// Bucket bounds, in seconds (holds for the batch size).
var (
	masterOpBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}
	waitBuckets     = prometheus.ExponentialBuckets(.001, 4, 10) // 1ms … 4.4m
	holdBuckets     = prometheus.ExponentialBuckets(.01, 4, 11)  // 10ms … 2.9h
	batchBuckets    = prometheus.ExponentialBuckets(1, 4, 8)     // 1 … 16384 holds
	roundBuckets    = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}
)

// The series read at scrape time (see stateCollector).
var (
	masterStateDesc = prometheus.NewDesc("lock_agent_master_state",
		"1 for the state each master is in (up, down, quarantined, unsafe, settings), 0 for the others.", []string{"master", "state"}, nil)
	masterStates   = []quorum.State{quorum.StateUp, quorum.StateDown, quorum.StateQuarantined, quorum.StateUnsafe, quorum.StateSettings}
	masterDataDesc = prometheus.NewDesc("lock_agent_master_quarantine_data",
		"1, while a master is quarantined, for what this agent can tell of why it holds nothing (new: a new deployment; lost: it lost its data, never bootstrap it; unknown; changed: the settings command quarantined it), 0 for the others.",
		[]string{"master", "data"}, nil)
	masterData   = []quorum.Data{quorum.DataNew, quorum.DataLost, quorum.DataUnknown, quorum.DataChanged}
	sessionsDesc = prometheus.NewDesc("lock_agent_sessions", "Client connections open.", nil, nil)
	quorumDesc   = prometheus.NewDesc("lock_agent_quorum", "How many masters must agree: a majority of those configured.", nil, nil)
)

// NewMetrics makes every series up front: those of each master in
// masters, and build_info with build's version, commit and Go version.
func NewMetrics(build buildinfo.Info, masters []quorum.MasterConfig) *Metrics {
	reg := prometheus.NewRegistry()
	f := factory{reg}
	m := &Metrics{registry: reg, byMode: map[protocol.Mode]*ModeMetrics{}, noQuorum: map[string]prometheus.Counter{},
		losses: map[renewal.Reason]prometheus.Counter{}}

	holds := f.gaugeVec("holds", "Names held by this agent's clients, by mode (a re-entered hold counts once).", "mode")
	waiters := f.gaugeVec("waiters", "LOCKs waiting in this agent's queues, by mode.", "mode")
	grants := f.counterVec("grants_total", "LOCKs granted a name from the masters, by mode.", "mode")
	reentries := f.counterVec("reentries_total", "LOCKs granted as a re-entry of a hold the session and owner had, by mode.", "mode")
	busy := f.counterVec("busy_total", "LOCKs answered BUSY: the name stayed held elsewhere until their wait ended, by mode.", "mode")
	wait := f.histogramVec("wait_seconds", "How long LOCKs waited in the queue, by mode and outcome (granted, busy, failed).", waitBuckets, "mode", "outcome")
	held := f.histogramVec("hold_seconds", "How long holds lasted, from the grant to UNLOCK, loss or disconnect, by mode.", holdBuckets, "mode")
	for _, mode := range []protocol.Mode{protocol.Exclusive, protocol.Shared} {
		mm := &ModeMetrics{Holds: holds.WithLabelValues(string(mode)), Waiters: waiters.WithLabelValues(string(mode)),
			Grants: grants.WithLabelValues(string(mode)), Reentries: reentries.WithLabelValues(string(mode)),
			Busy: busy.WithLabelValues(string(mode)), held: held.WithLabelValues(string(mode))}
		for o := range numOutcomes {
			mm.wait[o] = wait.WithLabelValues(string(mode), outcomeNames[o])
		}
		m.byMode[mode] = mm
	}

	noQuorum := f.counterVec("no_quorum_total", "Requests answered ERR NO_QUORUM, by verb (lock, extend, who).", "verb")
	for _, verb := range []string{"lock", "extend", "who"} {
		m.noQuorum[verb] = noQuorum.WithLabelValues(verb)
	}
	losses := f.counterVec("losses_total", "Holds lost without their client asking (pushed as LOST), by reason (quorum, expired, revoked).", "reason")
	for _, r := range []renewal.Reason{renewal.ReasonQuorum, renewal.ReasonExpired, renewal.ReasonRevoked} {
		m.losses[r] = losses.WithLabelValues(string(r))
	}

	masterOp := f.histogramVec("master_op_duration_seconds",
		"Time for one master to answer one operation (acquire, renew, extend, release, who), timeouts included, by master.", masterOpBuckets, "master", "op")
	quarantines := f.counterVec("quarantines_total", "Times a master entered quarantine because it lost its data, by master.", "master")
	for _, mc := range masters {
		for op := range quorum.NumOps {
			m.masterOp[op] = append(m.masterOp[op], masterOp.WithLabelValues(mc.Name, op.String()))
		}
		m.quarantines = append(m.quarantines, quarantines.WithLabelValues(mc.Name))
	}
	m.fenceSettles = f.counter("fence_settles_total", "Grants that waited for their fence to be written back because no majority of the granting masters was in step.")
	m.fenceWriteBacks = f.counter("fence_writebacks_total", "Masters a grant's fence was written back to (waited for or in the background).")
	m.renewalBatch = f.histogram("renewal_batch_holds", "Holds renewed per watchdog round.", batchBuckets)
	m.tails = newTailSeries(f)
	m.WantedPushes = f.counter("wanted_pushes_total", "WANTED pushes to notify=wanted holders: a request that conflicts with the hold started waiting, on any agent.")
	m.observeMetrics = newObserveMetrics(f)
	m.cacheSeries = newCacheSeries(f)
	m.renewalRoundTime = f.histogram("renewal_round_duration_seconds", "Time for one watchdog renewal round over every voting master, repairs included.", roundBuckets)

	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: namespace, Name: "build_info",
			Help:        "Always 1; the version, commit and Go version of the running binary are labels.",
			ConstLabels: prometheus.Labels{"version": build.Version, "commit": build.Commit, "goversion": build.GoVersion}}, func() float64 { return 1 }))
	return m
}

const namespace = "lock_agent"

// factory registers the agent's series under the lock_agent_ namespace.
type factory struct{ reg *prometheus.Registry }

func (f factory) counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help})
	f.reg.MustRegister(c)
	return c
}

func (f factory) counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help}, labels)
	f.reg.MustRegister(c)
	return c
}

func (f factory) gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: name, Help: help}, labels)
	f.reg.MustRegister(g)
	return g
}

func (f factory) histogram(name, help string, buckets []float64) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Name: name, Help: help, Buckets: buckets})
	f.reg.MustRegister(h)
	return h
}

func (f factory) histogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: name, Help: help, Buckets: buckets}, labels)
	f.reg.MustRegister(h)
	return h
}

// Mode returns the series of a mode; the parser admits only known modes.
func (m *Metrics) Mode(mode protocol.Mode) *ModeMetrics {
	if mm := m.byMode[mode]; mm != nil {
		return mm
	}
	return m.byMode[protocol.Exclusive]
}

// LockAnswered records the answer to a LOCK of mode that joined a queue at
// joined: granted (count > 1 for a re-entry) when err is nil, else BUSY,
// NO_QUORUM or another failure.
func (m *Metrics) LockAnswered(mode protocol.Mode, joined time.Time, count int, err error) {
	mm := m.Mode(mode)
	o := outcomeFailed
	switch {
	case err == nil && count > 1:
		mm.Reentries.Inc()
		o = outcomeGranted
	case err == nil:
		mm.Grants.Inc()
		o = outcomeGranted
	case errors.Is(err, quorum.ErrBusy):
		mm.Busy.Inc()
		o = outcomeBusy
	case errors.Is(err, protocol.ErrNoQuorum):
		m.noQuorum["lock"].Inc()
	}
	mm.wait[o].Observe(time.Since(joined).Seconds())
}

// NoQuorumAnswered counts an ERR NO_QUORUM answer to verb (extend or who).
func (m *Metrics) NoQuorumAnswered(verb string) { m.noQuorum[verb].Inc() }

// HoldStarted counts a hold of mode.
func (m *Metrics) HoldStarted(mode protocol.Mode) { m.Mode(mode).Holds.Inc() }

// HoldDowngraded moves a hold counted as from to the shared holds.
func (m *Metrics) HoldDowngraded(from protocol.Mode) {
	m.Mode(from).Holds.Dec()
	m.Mode(protocol.Shared).Holds.Inc()
}

// HoldEnded uncounts a hold of mode granted at granted, and records how long
// it lasted.
func (m *Metrics) HoldEnded(mode protocol.Mode, granted time.Time) {
	mm := m.Mode(mode)
	mm.Holds.Dec()
	mm.held.Observe(time.Since(granted).Seconds())
}

// Lost counts a hold lost without its client asking.
func (m *Metrics) Lost(reason renewal.Reason) {
	if c := m.losses[reason]; c != nil {
		c.Inc()
	}
}

// MasterOp implements quorum.Observer.
func (m *Metrics) MasterOp(master int, op quorum.Op, d time.Duration) {
	m.masterOp[op][master].Observe(d.Seconds())
}

// Quarantined implements quorum.Observer.
func (m *Metrics) Quarantined(master int) { m.quarantines[master].Inc() }

// FenceWriteBack implements quorum.Observer.
func (m *Metrics) FenceWriteBack(masters int, waited bool) {
	if waited {
		m.fenceSettles.Inc()
	}
	m.fenceWriteBacks.Add(float64(masters))
}

// ObservedRenewer returns r timed: each renewal round's duration and size
// are recorded.
func (m *Metrics) ObservedRenewer(r renewal.Renewer) renewal.Renewer {
	return observedRenewer{r, m}
}

// observedRenewer times the watchdog's renewal rounds.
type observedRenewer struct {
	renewal.Renewer
	m *Metrics
}

func (r observedRenewer) Renew(ctx context.Context, lease time.Duration, keys []quorum.RenewKey) []quorum.RenewResult {
	start := time.Now()
	out := r.Renewer.Renew(ctx, lease, keys)
	r.m.renewalRoundTime.Observe(time.Since(start).Seconds())
	r.m.renewalBatch.Observe(float64(len(keys)))
	return out
}

// CollectState has each scrape read, at that moment, the masters' states
// and quorum from cluster and the count of open sessions.
func (m *Metrics) CollectState(cluster *quorum.Cluster, sessions func() int) {
	m.registry.MustRegister(stateCollector{cluster.Status, cluster.Quorum, sessions})
}

// stateCollector reads, at each scrape, what the agent already keeps:
// sessions, the masters' states and the quorum (see CollectState).
type stateCollector struct {
	status   func() []quorum.MasterStatus
	quorum   func() int
	sessions func() int
}

func (c stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- masterStateDesc
	ch <- masterDataDesc
	ch <- shardStateDesc
	ch <- shardQuarantinedSlotsDesc
	ch <- sessionsDesc
	ch <- quorumDesc
}

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	for _, ms := range c.status() {
		for _, st := range masterStates {
			v := 0.0
			if ms.State == st {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(masterStateDesc, prometheus.GaugeValue, v, ms.Name, string(st))
		}
		for _, d := range masterData {
			v := 0.0
			if ms.Data == d {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(masterDataDesc, prometheus.GaugeValue, v, ms.Name, string(d))
		}
		collectShards(ch, ms)
	}
	ch <- prometheus.MustNewConstMetric(sessionsDesc, prometheus.GaugeValue, float64(c.sessions()))
	ch <- prometheus.MustNewConstMetric(quorumDesc, prometheus.GaugeValue, float64(c.quorum()))
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
}
