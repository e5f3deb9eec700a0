package quorum

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/lock-agent/lock-agent/quorum/rules"
	"github.com/lock-agent/lock-agent/quorum/scripts"
	"github.com/redis/rueidis"
)

// MasterConfig is one independent Redis master.
type MasterConfig struct {
	Name     string
	Address  string
	Username string
	Password string
	DB       int
	TLS      *tls.Config // nil for plain TCP
	// AllowReplicas accepts a master that has replicas attached, unchecked:
	// the operator says none of them is ever promoted (they are for
	// backups). A promoted one is still caught by its run_id (see scripts/lua/gate.lua),
	// but nothing bounds a split brain. See ReplicaLag for replicas that
	// may be promoted.
	AllowReplicas bool
	// Sentinels, when set, are the Sentinels ("host:port") asked which
	// server is the primary of MasterSet, instead of Address; the client
	// follows a failover (see standalone.go). SentinelUsername and
	// SentinelPassword authenticate to the Sentinels.
	Sentinels                          []string
	MasterSet                          string
	SentinelUsername, SentinelPassword string
	// ReplicaLag, when > 0, accepts a primary with replicas that may be
	// promoted, when the primary bounds a split brain: it refuses writes
	// once it lost its replicas for longer than its min-replicas-max-lag,
	// which must be at most ReplicaLag (see checkSafety), and a master
	// found with another server's data sits out ReplicaLag + 2.1s more than
	// the quarantine (see failoverMargin). Default 1s with Sentinels or
	// Cluster, 0 (replicas are unsafe) for an Address.
	ReplicaLag time.Duration
	// Cluster, when set, are seed nodes ("host:port") of a Redis Cluster
	// that is this one master, instead of Address: one voter made of all
	// its shards, with a marker and a quarantine per hash slot (see
	// shards.go).
	Cluster []string
}

// State is a master's health as the agent sees it.
type State string

// The master states.
const (
	StateUp          State = "up"
	StateDown        State = "down"
	StateQuarantined State = "quarantined"
	// StateUnsafe: the master is configured so that it may forget holds
	// (a replica, replicas attached, an eviction policy): it never votes.
	StateUnsafe State = "unsafe"
	// StateSettings: the master's marker records other settings than this
	// agent's (see Settings): it does not vote for this agent.
	StateSettings State = "settings"
)

// master is one Redis master: a rueidis client made once it can connect, a
// health probe that marks it up, down or quarantined, and a subscriber.
type master struct {
	cfg     MasterConfig
	index   int // in Config.Masters: how an Observer names it
	cluster *Cluster
	log     hclog.Logger

	mu         sync.RWMutex
	client     rueidis.Client // rounds: acquire, release, extend, who, fences
	bulk       rueidis.Client // renewals and repairs, which may be large
	health     rueidis.Client // the probe and the safety check
	state      State
	lastErr    error
	epoch      string    // the epoch marker seen last; "" before the first probe
	failures   int       // consecutive failed probes
	quarantine time.Time // when its quarantine (as the master told it) ends
	unsafe     error     // why the master is unsafe, nil if it is not
	// probed, fresh and epochChanged are what ClassifyData needs of the
	// marker (see MarkerFacts), as the probe last saw it.
	probed, fresh, changed, epochChanged bool
	// refusal is why the gate last refused the probe (a *SettingsError,
	// ErrUnplanted), nil if it did not; recorded is the settings the marker
	// records ("" if none, or not probed yet).
	refusal  error
	recorded string
	checked  time.Time // when its configuration was last checked
	// settledEpoch is the last epoch whose tail horizon the probe found
	// settled (see the tail horizon in gate.go): it asks no more of it.
	settledEpoch string

	// view is what the marker records (a MarkerView), as the probe saw it;
	// read without the lock by Cluster.markerCounts on every gate call.
	view atomic.Int32

	// rtt estimates this master's answer times (see RTT), from the answers
	// rounds read: see Cluster.roundTimeout.
	rttMu sync.Mutex
	rtt   rules.RTT
	// heard is when the master last answered anything: ns since
	// monoEpoch, on the monotonic clock.
	heard atomic.Int64
	// runID is the server run_id the last probe verified its marker carries
	// ("" before): every gate call compares the marker's with it.
	runID atomic.Pointer[string]
	// dials counts each lane's new connections, runChecked the count up
	// to which a call on the lane read the server's run_id since (see
	// uncheckedRun).
	dials, runChecked [3]atomic.Uint64
	// reload asks the probe to load the scripts. They are loaded only after
	// a probe ran the gate that reads the run_id, so that no EVALSHA (whose
	// gate does not read it) finds them on a restarted master nobody
	// checked. A NOSCRIPT sets it too (a restart, SCRIPT FLUSH).
	reload atomic.Bool

	subMu sync.Mutex
	sub   rueidis.DedicatedClient // nil while not subscribed
	// leaving is the channels whose unsubscription waits for subMu (see
	// unsubscribe).
	leaving leaving

	connected chan struct{} // closed once client is set

	// acquires, leanAcquires and releases batch the rounds' calls of the
	// hot scripts (see batcher, below).
	acquires, leanAcquires, releases batcher

	// shards is, for a master that is a Redis Cluster, its view of its
	// shards (see shards.go); nil for a standalone master.
	shards *shardSet
	// t is how the master reaches its server or servers: standalone or
	// sharded (see transport, below). Set once, in New.
	t transport
}

// transport is how a master reaches its server or servers, behind one
// interface as redsync's Pool is: standalone, one server (perhaps found
// through its Sentinels), and sharded, a Redis Cluster whose keys, markers
// and quarantines are one per hash slot (see standalone.go and
// shards.go). A master holds one, set in New; its methods of the same
// names (probe, quarantined, ...) hand on to it.
type transport interface {
	// probe checks the server(s) and runs the probe's gate.
	probe(runCtx context.Context)
	// run runs s on c, the master's connection l (args with the gate's
	// arguments completed); runMulti runs s once per call on c, the bulk
	// connection.
	run(ctx context.Context, l lane, c rueidis.Client, s *scripts.Script, keys, args []string) rueidis.RedisResult
	runMulti(ctx context.Context, c rueidis.Client, s *scripts.Script, calls []call) []rueidis.RedisResult
	// quarantined records that a vote answered the master is quarantined
	// for left more.
	quarantined(left time.Duration)
	// loadScripts puts every script in the server's cache.
	loadScripts(runCtx context.Context)
	// horizon is the master's tail horizon, asked on connection l.
	horizon(ctx context.Context, l lane) rules.Horizon
	// markerReplies runs s with args on the master's marker, or markers.
	markerReplies(ctx context.Context, s *scripts.Script, args []string) []rueidis.RedisResult
	// settingsMarker is the marker whose settings are the master's.
	settingsMarker() string
	// voteErr says why a call of spec may not count as a vote (nil if it may).
	voteErr(spec roundSpec) error
	// publishOn publishes message on channel from outside a script, on c.
	publishOn(ctx context.Context, c rueidis.Client, channel, message string)
	// subscribeLoop, subscribe and unsubscribe keep the master's side of
	// the watches (see watch.go).
	subscribeLoop(ctx context.Context)
	subscribe(ctx context.Context, ch string) bool
	unsubscribe(ctx context.Context, ch string)
	// shardStatus is the master's shards for STATUS (none when standalone).
	shardStatus() []ShardStatus
	// perSlot says whether a call's keys must share a hash slot: batches of
	// names are not sent to such a master, renewals are cut per slot (see
	// renewCalls), and its marker facts are per slot, not the master's.
	perSlot() bool
}

// The master's methods that hand on to its transport.

func (m *master) probe(runCtx context.Context)                      { m.t.probe(runCtx) }
func (m *master) quarantined(left time.Duration)                    { m.t.quarantined(left) }
func (m *master) loadScripts(runCtx context.Context)                { m.t.loadScripts(runCtx) }
func (m *master) horizon(ctx context.Context, l lane) rules.Horizon { return m.t.horizon(ctx, l) }
func (m *master) subscribeLoop(ctx context.Context)                 { m.t.subscribeLoop(ctx) }
func (m *master) subscribe(ctx context.Context, ch string) bool     { return m.t.subscribe(ctx, ch) }
func (m *master) unsubscribe(ctx context.Context, ch string)        { m.t.unsubscribe(ctx, ch) }

// batcherFor is the batcher of s's calls, nil if s is not batched.
func (m *master) batcherFor(s *scripts.Script) *batcher {
	if m.t.perSlot() { // a batch of names spans slots
		return nil
	}
	switch s {
	case scripts.Acquire:
		return &m.acquires
	case scripts.AcquireLean:
		return &m.leanAcquires
	case scripts.Release:
		return &m.releases
	}
	return nil
}

// answeredIn adds one answer that took d to the master's RTT estimate.
func (m *master) answeredIn(d time.Duration) {
	m.rttMu.Lock()
	m.rtt = m.rtt.Add(d)
	m.rttMu.Unlock()
}

// hear notes an answer from the master: a reply, or an error it answered.
func (m *master) hear(r rueidis.RedisResult) {
	if err := r.Error(); err == nil || rueidis.IsRedisNil(err) {
		m.heard.Store(int64(time.Since(monoEpoch)))
	} else if _, ok := rueidis.IsRedisErr(err); ok {
		m.heard.Store(int64(time.Since(monoEpoch)))
	}
}

// monoEpoch is what heard counts from: a time.Time with its monotonic
// reading, so that a step of the wall clock moves no master's silence.
var monoEpoch = time.Now()

// heardSince is when the master last answered anything, or since if
// that was before.
func (m *master) heardSince(since time.Time) time.Time {
	if heard := monoEpoch.Add(time.Duration(m.heard.Load())); heard.After(since) {
		return heard
	}
	return since
}

// doubted says whether the probe doubts the master: it found it silent
// (or failing) since it last answered, or marked it down.
func (m *master) doubted() bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.failures > 0 || m.state == StateDown
}

// timeout is how long the master's answers may take before they are late
// (see RTT.Timeout): master_timeout at least, 10×master_timeout at most.
func (m *master) timeout() time.Duration {
	m.rttMu.Lock()
	r := m.rtt
	m.rttMu.Unlock()
	return r.Timeout(m.cluster.cfg.MasterTimeout, 10*m.cluster.cfg.MasterTimeout)
}

func (m *master) getClient() rueidis.Client {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.client
}

// voteErr returns nil if the master may vote in a round, or why not.
func (m *master) voteErr() error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	switch {
	case m.client == nil:
		return &MasterError{m.cfg.Name, ErrNotConnected}
	case m.state == StateDown:
		return &MasterError{m.cfg.Name, ErrMasterDown}
	case m.unsafe != nil:
		return &MasterError{m.cfg.Name, m.unsafe}
	case m.refusal != nil:
		return &MasterError{m.cfg.Name, m.refusal}
	case m.cluster.clock.Now().Before(m.quarantine):
		return &MasterError{m.cfg.Name, ErrQuarantined}
	}
	return nil
}

func (m *master) status() MasterStatus {
	m.mu.RLock()
	defer m.mu.RUnlock()
	s := MasterStatus{Name: m.cfg.Name, Address: m.addressOf(m.client), State: m.state, Settings: m.recorded}
	if m.lastErr != nil {
		s.Err = describe(m.lastErr)
	}
	s.Unplanted = errors.Is(m.lastErr, ErrUnplanted)
	if m.state == StateQuarantined {
		s.QuarantineLeft = max(m.quarantine.Sub(m.cluster.clock.Now()), 0)
	}
	s.Shards = m.t.shardStatus()
	return s
}

func (m *master) setState(s State, err error) {
	m.mu.Lock()
	old, oldErr := m.state, m.lastErr
	m.state, m.lastErr = s, err
	m.mu.Unlock()
	// A master with no marker yet (ErrUnplanted) shows as quarantined, but
	// its quarantine starts only when a marker is planted.
	changed := old != s || errors.Is(oldErr, ErrUnplanted) != errors.Is(err, ErrUnplanted)
	if !changed {
		return
	}
	if s == StateQuarantined && errors.Is(err, ErrQuarantined) {
		m.cluster.cfg.Observer.Quarantined(m.index)
	}
	switch {
	case s == StateUnsafe:
		m.log.Error("master is unsafe and does not vote", "from", old, "reason", err)
	case s == StateQuarantined:
		d := m.cluster.data()[m.index]
		m.log.Warn("master state changed", "from", old, "to", s, "reason", describe(err), "data", d, "advice", d.Advice())
	case err != nil:
		m.log.Warn("master state changed", "from", old, "to", s, "reason", describe(err))
	default:
		m.log.Info("master state changed", "from", old, "to", s)
	}
}

// run keeps the master connected and probed until ctx ends.
func (m *master) run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		m.subscribeLoop(ctx)
	}()
	defer wg.Wait()
	interval := m.cluster.cfg.ProbeInterval
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if m.getClient() == nil {
			m.connect(ctx)
		}
		if m.getClient() != nil {
			m.probe(ctx)
		}
		m.cluster.sampleHost() // a recent reading for the rounds to start from
		t.Reset(interval)
	}
}

// connect makes the master's three connections. Each is one pipeline, so
// commands on it run in the order they were issued: the release of a failed
// or decided round can never overtake an acquire of that round still in
// flight (with several pipes it can, orphaning a key for a whole lease).
// Renewals, which can be large, go on their own connection, which the
// master serves turn about with the rounds' instead of queueing rounds
// behind them; and the probe has its own, so that it measures the master,
// not how busy our own pipelines are (a busy master is not a dead one).
func (m *master) connect(ctx context.Context) {
	var clients [3]rueidis.Client
	for i := range clients {
		c, err := m.newClient(ctx, lane(i))
		if err != nil {
			for _, c := range clients[:i] {
				c.Close()
			}
			m.setState(StateDown, m.sentinelErr(err))
			return
		}
		clients[i] = c
	}
	m.mu.Lock()
	if m.cluster.closed() {
		m.mu.Unlock()
		for _, c := range clients {
			c.Close()
		}
		return
	}
	m.client, m.bulk, m.health = clients[0], clients[1], clients[2]
	close(m.connected)
	m.mu.Unlock()
	m.log.Info("connected", "address", m.addressOf(m.getClient()))
	m.reload.Store(true) // by the probe, once it checked the master's run_id
}

// newClient makes one connection. A stop (ctx) while it connects closes
// what it dialed: a master that accepts a connection and does not answer
// (a paused one) would keep the stop waiting out the handshake's timeout.
func (m *master) newClient(ctx context.Context, l lane) (rueidis.Client, error) {
	timeout := m.cluster.cfg.MasterTimeout
	var mu sync.Mutex
	connecting, stops := true, []func() bool(nil)
	dial := func(dctx context.Context, dst string, d *net.Dialer, tc *tls.Config) (net.Conn, error) {
		dctx, cancel := context.WithCancel(dctx) // a stop ends the dial too
		defer cancel()
		defer context.AfterFunc(ctx, cancel)()
		var conn net.Conn
		var err error
		if tc != nil {
			conn, err = (&tls.Dialer{NetDialer: d, Config: tc}).DialContext(dctx, "tcp", dst)
		} else {
			conn, err = d.DialContext(dctx, "tcp", dst)
		}
		if err != nil {
			return nil, err
		}
		m.dialed(l)
		mu.Lock()
		if connecting { // a reconnection later is not: a stop lets its releases land
			stops = append(stops, context.AfterFunc(ctx, func() { conn.Close() }))
		}
		mu.Unlock()
		return conn, nil
	}
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		connecting = false
		for _, stop := range stops {
			stop()
		}
	}()
	return rueidis.NewClient(m.withCluster(m.withSentinels(rueidis.ClientOption{
		DialCtxFn:         dial,
		InitAddress:       []string{m.cfg.Address},
		Username:          m.cfg.Username,
		Password:          m.cfg.Password,
		SelectDB:          m.cfg.DB,
		TLSConfig:         m.cfg.TLS,
		ForceSingleClient: true,
		DisableCache:      true,
		// Lock scripts must never be retried: a retried acquire may run twice.
		DisableRetry:      true,
		PipelineMultiplex: -1, // one pipeline: see connect
		Dialer:            net.Dialer{Timeout: max(4*timeout, time.Second), KeepAlive: 30 * time.Second},
		// Detect a hung connection well within a lease; the probe marks the
		// master down sooner than this.
		ConnWriteTimeout: max(10*timeout, 2*time.Second),
	})))
}

// lane picks one of the master's connections.
type lane int

const (
	laneRounds lane = iota
	laneBulk
	laneHealth
)

func (m *master) conn(l lane) rueidis.Client {
	m.mu.RLock()
	defer m.mu.RUnlock()
	switch l {
	case laneBulk:
		return m.bulk
	case laneHealth:
		return m.health
	}
	return m.client
}

// probeFailed counts a failed probe: one slow answer on a loaded host is
// not an outage, two in a row are. Operations time out on their own
// meanwhile. A probe cancelled because the cluster stops counts nothing.
func (m *master) probeFailed(err error) {
	if errors.Is(err, context.Canceled) {
		return
	}
	m.mu.Lock()
	m.failures++
	down := m.failures >= 2 || m.state == StateDown
	m.mu.Unlock()
	if down {
		m.setState(StateDown, err)
	}
}

// eval runs s on the rounds' connection: see evalOn.
func (m *master) eval(ctx context.Context, s *scripts.Script, keys, args []string) rueidis.RedisResult {
	return m.evalOn(ctx, laneRounds, s, keys, args)
}

// evalOn runs s on the connection l by EVALSHA, running its fallback by
// EVAL when the master does not know it (see scripts.Script.AfterRestart).
func (m *master) evalOn(ctx context.Context, l lane, s *scripts.Script, keys, args []string) rueidis.RedisResult {
	c := m.conn(l)
	if c == nil {
		return rueidis.NewErrorResult(ErrNotConnected)
	}
	return m.t.run(ctx, l, c, s, keys, m.gateArgs(s, args))
}

// evalMulti runs one script over many key sets in one pipelined round trip
// on the bulk connection.
func (m *master) evalMulti(ctx context.Context, s *scripts.Script, calls []call) []rueidis.RedisResult {
	c := m.conn(laneBulk)
	if c == nil {
		out := make([]rueidis.RedisResult, len(calls))
		for i := range out {
			out[i] = rueidis.NewErrorResult(ErrNotConnected)
		}
		return out
	}
	return m.t.runMulti(ctx, c, s, calls)
}

type call struct {
	keys, args []string
}

func noScript(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	return ok && re.IsNoScript()
}

func (m *master) close() {
	m.mu.Lock()
	clients := []rueidis.Client{m.client, m.bulk, m.health}
	m.client, m.bulk, m.health = nil, nil, nil
	m.mu.Unlock()
	for _, c := range clients {
		if c != nil {
			c.Close()
		}
	}
}

// unlessStopped runs call aside and returns what it returned, or false as
// soon as ctx ends. The client library runs a call on an idle connection
// to its deadline whatever the context says (see gate), and makes a
// dedicated connection with no context at all; a stop waits for the
// master's loops (see Cluster.Run), and must not wait for a paused
// master's answer too (TestBinaryStopsWithin5sWithMastersPaused took 5.5s:
// its loops 2.5s in a script load and a subscription's dial). What call
// returns after ctx ended is handed to late.
func unlessStopped[T any](ctx context.Context, call func() T, late func(T)) (T, bool) {
	done := make(chan T, 1)
	go func() { done <- call() }()
	select {
	case r := <-done:
		return r, true
	case <-ctx.Done():
		go func() { late(<-done) }()
		var zero T
		return zero, false
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Batches. A round sends a script to every master; many rounds at once
// (many clients on many names, a burst) would each cost a master a script
// call, and the agent a command, a goroutine and mostly a write per master.
// So the hot scripts (acquire, release) go through a batcher per master: a
// round's call is made at once, alone, while the master has fewer than
// batchSenders calls of that script in flight, and otherwise waits for one
// to come back and goes with every item that waited meanwhile, in one call
// of the batch script (see scripts/lua/batch.lua). One round alone pays for none of it.
//
// Batching changes no outcome: a batch runs its items in order, each as its
// own call would, and an item's reply is its own. Items of one round's
// masters still travel independently, and the rounds' order on a master
// was never relied on (see scripts/lua/release.lua: tombstones make a release that
// overtakes its acquire win).

const (
	// batchSenders is how many calls of one script a master has in
	// flight before rounds wait for a batch: enough that one slow answer
	// (the third master's, which a round no longer waits for) does not
	// make the next serial round wait, and that the master stays busy
	// while a batch's reply travels.
	batchSenders = 4
	// batchMax bounds the items of one call, and so how long one script
	// keeps the master from everything else.
	batchMax = 64
	// batchQueueMax bounds the items waiting for one master, which grow
	// while it hangs (a hung master is answered 64 items per call per
	// deadline). Beyond it an item fails at once, as a master that does not
	// answer: an acquire is a lost vote; a release leaves the hold to
	// expire with its lease there, as any release that cannot reach a
	// master does.
	batchQueueMax = 1 << 16
)

// batchItem is one round's script call on one master, waiting for a batch.
type batchItem struct {
	keys, args []string
	deadline   time.Time                 // when its caller stops waiting
	timeout    time.Duration             // how long it had when it was queued
	done       func(rueidis.RedisResult) // called once, by a sender; nil once called
}

// batcher gathers a master's items of one script into batches.
type batcher struct {
	m    *master
	many *scripts.Script // the batch variant of the script
	// land is set for a script whose calls must land however late (a
	// release: see Release). Its items are sent however long they waited,
	// each with its whole timeout from then, as a call of its own written
	// to a hung master lands when the master answers again; one past its
	// deadline is answered then, as that call would be, so that callers do
	// not pile up behind a hung master.
	land bool
	mu   sync.Mutex
	// queue holds the items waiting for a sender; inflight counts the
	// calls of the script in flight (alone or batches). The first answered
	// items of the queue were answered at their deadline already (see
	// expireLocked): they wait only to be sent, for a batcher that lands.
	queue    []*batchItem
	answered int
	inflight int
}

// wait queues it if the master has batchSenders calls of the script in
// flight already: a sender then answers it (or wait itself, at once, if
// batchQueueMax items wait already). Else it counts a call that the caller
// makes at once, alone, and must end with done.
func (b *batcher) wait(it *batchItem) (answered bool) {
	b.mu.Lock()
	switch {
	case b.inflight < batchSenders:
		b.inflight++
		b.mu.Unlock()
		return false
	case len(b.queue) >= batchQueueMax:
		b.mu.Unlock()
		it.done(rueidis.NewErrorResult(ErrOverloaded))
		return true
	}
	b.queue = append(b.queue, it)
	expired := b.expireLocked(time.Now())
	b.mu.Unlock()
	for _, done := range expired {
		done(rueidis.NewErrorResult(context.DeadlineExceeded))
	}
	return true
}

// expireLocked takes the callbacks of the items at the front of the queue
// whose deadline passed, for the caller to answer once b.mu is let go: a
// caller behind a hung master hears about when its deadline passes (the
// next call queued after it looks), not only when a sender reaches its
// item. Such an item leaves the queue, unless the batcher lands its items
// (it is then sent all the same). Items come in deadline order, but for
// rounds of other timeouts: one of those is answered when a sender
// reaches it. b.mu is held.
func (b *batcher) expireLocked(now time.Time) []func(rueidis.RedisResult) {
	var expired []func(rueidis.RedisResult)
	for b.answered < len(b.queue) && !now.Before(b.queue[b.answered].deadline) {
		it := b.queue[b.answered]
		expired = append(expired, it.done)
		it.done = nil
		b.answered++
	}
	if !b.land && b.answered > 0 {
		rest := copy(b.queue, b.queue[b.answered:])
		clear(b.queue[rest:])
		b.queue = b.queue[:rest]
		b.answered = 0
	}
	return expired
}

// done ends a call the caller made alone: its goroutine then sends, as
// batches, the items that waited meanwhile, until none is left.
func (b *batcher) done() {
	for {
		b.mu.Lock()
		n := min(len(b.queue), batchMax)
		if n == 0 {
			b.inflight--
			b.mu.Unlock()
			return
		}
		batch := make([]*batchItem, n)
		copy(batch, b.queue)
		rest := copy(b.queue, b.queue[n:])
		clear(b.queue[rest:])
		b.queue = b.queue[:rest]
		b.answered = max(b.answered-n, 0)
		b.mu.Unlock()
		b.run(batch)
	}
}

// errBatchReply is a batch reply that does not answer every item.
var errBatchReply = errors.New("batch reply has the wrong number of items")

// run sends one batch and hands each item its reply. An item whose
// caller gave up meanwhile is not sent (it could only be undone), unless
// the batcher's items must land.
func (b *batcher) run(batch []*batchItem) {
	now := time.Now()
	live := batch[:0]
	var deadline time.Time
	for _, it := range batch {
		itemDeadline := it.deadline
		if !now.Before(itemDeadline) {
			if it.done != nil { // not answered in the queue already (see expireLocked)
				it.done(rueidis.NewErrorResult(context.DeadlineExceeded))
				it.done = nil
			}
			if !b.land {
				continue
			}
		}
		if b.land {
			itemDeadline = now.Add(it.timeout)
		}
		live = append(live, it)
		if itemDeadline.After(deadline) {
			deadline = itemDeadline
		}
	}
	if len(live) == 0 {
		return
	}
	keys := make([]string, 0, len(live)*len(live[0].keys))
	args := make([]string, 0, len(live)*len(live[0].args))
	for _, it := range live {
		keys = append(keys, it.keys...)
		args = append(args, it.args...)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	vals, err := b.m.evalOn(ctx, laneRounds, b.many, keys, args).ToArray()
	cancel()
	if err == nil && len(vals) != len(live) {
		err = errBatchReply
	}
	for i, it := range live {
		switch {
		case it.done == nil: // answered at its deadline
		case err != nil:
			it.done(rueidis.NewErrorResult(err))
		default:
			it.done(rueidis.NewResult(vals[i], nil))
		}
	}
}

// leaving is the channels whose unsubscriptions wait for the mutex of a
// master's subscriptions: the first caller to get that mutex sends them
// all (see standalone.unsubscribe, shardSubs.unsubscribe). Its own mutex is
// taken after that one, and never while waiting for it.
type leaving struct {
	mu    sync.Mutex
	chans []string
}

// add notes ch as waiting to be unsubscribed.
func (l *leaving) add(ch string) {
	l.mu.Lock()
	l.chans = append(l.chans, ch)
	l.mu.Unlock()
}

// take returns the waiting channels but those watched again since (a new
// Watch of the name), and empties the list.
func (l *leaving) take(watched func(string) bool) []string {
	l.mu.Lock()
	chans := l.chans
	l.chans = nil
	l.mu.Unlock()
	return slices.DeleteFunc(chans, watched)
}
