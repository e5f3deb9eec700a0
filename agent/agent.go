// Package agent is lock-agent's daemon: the Unix socket server, the sessions
// that tie holds to connections, and the lock manager, which keeps what the
// agent knows of each name (its holders, its waiters, the record it lends).
// It composes quorum (RedLock over the masters) and renewal (the watchdog).
//
// A file per concept; the server's side (the wire, dispatch, the order of
// replies, access checks), then the lock manager's. The two sides meet at
// two small interfaces: the server calls the manager through locks
// (session.go), the manager calls a session back through client (hold.go);
// no server file takes the manager's mutex or reads its records, and no
// manager file reads a session's.
//
//	agent.go      the Agent, the composition root: New, Run, its stop; the
//	              open sessions; its health and metrics
//	config.go     Config and its defaults, Quarantine, the settings every
//	              master records, what a SIGHUP changes (SetLive)
//
//	session.go    one connection: read, dispatch, idle_timeout, BYE, close;
//	              HELLO, PING, STATUS; the access checks (allow); locks,
//	              what the server asks of the manager
//	order.go      the order of a session's requests on a hold: turns, and
//	              the LOCK, UNLOCK, EXTEND, SET and WHO that take them
//	lock.go       LOCK: re-entry, a lent record, a wait; a multi-lock; a
//	              grant's hold installed in the session
//	verbs.go      every other verb: UNLOCK, EXTEND, CANCEL, HOLDS, WHO,
//	              REVOKE, SET, CHECK, OBSERVE, UNOBSERVE; a hold's undoing
//	              and its LOST, on the session's side
//
//	name.go       the manager, and its one record per name: all the agent
//	              knows of a name
//	waiters.go    who waits: a LOCK's wait, the name's queue, its entries
//	              in the masters' fair queue, the waiting record WHO shows
//	contender.go  the goroutine that tries the masters for a queue's head
//	hold.go       a hold's life: grant, loss, release, tail, value; client,
//	              what the manager asks of a session
//	lend.go       lending a record held in the masters to local holders,
//	              the lease/2 rule, the safety essay; its two policies:
//	cohort.go     a run, while local waiters queue
//	cache.go      a linger, after the last local holder let go
//	watch.go      a name's channel: WANTED pushes and LEADER to observers
//
// and packages beside it: outbox (a session's lines for its client), acl
// (access rules), socket (the listener, peer credentials), status (STATUS
// lines), telemetry (metrics, health), memory, systemd, and config (the
// config file, which builds a Config).
//
// A session keeps its holds (the manager makes each, and the watchdog's
// record points back at it: see hold) and the order of its replies; the
// manager keeps everything else of a name. The lock order that keeps the
// two straight is written at session.mu.
package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/lock-agent/lock-agent/agent/memory"
	"github.com/lock-agent/lock-agent/agent/socket"
	"github.com/lock-agent/lock-agent/agent/systemd"
	"github.com/lock-agent/lock-agent/agent/telemetry"
	"github.com/lock-agent/lock-agent/quorum"
	"github.com/lock-agent/lock-agent/quorum/clock"
	"github.com/lock-agent/lock-agent/renewal"
)

// shutdownGrace bounds how long a stopping agent waits for sessions to
// say BYE and release their holds, counted from the start of the stop (a
// session's BYE may wait for its answers: see byeWait). Healthy masters
// take milliseconds; the rest of the
// 5s a stop may take is for the cached names (half a second: see
// cacheReleaseGrace) and the cluster to stop (releases in flight get half
// a second, closing the connections half a second: see quorum's Run), and
// a second of slack for a busy host: with every master paused, a loaded
// host (the whole suite under -race on two cores) was seen to stop 5.2s
// and 5.5s after the signal with half a second.
const shutdownGrace = 2500 * time.Millisecond

// Agent is one running lock agent.
type Agent struct {
	cfg      Config // as at start; what a SIGHUP changes is in live
	live     atomic.Pointer[live]
	log      hclog.Logger
	clock    clock.Clock
	cluster  *quorum.Cluster
	watchdog *renewal.Watchdog
	metrics  *metrics
	instance string // random per process: holder ids of a restarted agent never collide

	health *telemetry.Health // liveness of the agent's own loops

	ln    *net.UnixListener
	ready chan struct{} // closed once listening

	// locks is the lock manager, srv the server: the sessions reach the
	// manager through locks (session.go), it reaches them through client
	// (hold.go).
	locks      *manager
	srv        *server
	sessionsWG sync.WaitGroup
}

// New builds an agent from cfg. It does not listen or connect until Run.
func New(cfg Config, log hclog.Logger) (*Agent, error) {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	clk := cfg.Clock
	if clk == nil {
		clk = clock.Real{}
	}
	a := &Agent{cfg: cfg, log: log, clock: clk, instance: randomHex(4), ready: make(chan struct{}),
		metrics: newMetrics(cfg.Masters)}
	a.locks = newManager(cfg, &a.live, log, clk, a.metrics, a.instance)
	a.srv = newServer(cfg, &a.live, log, clk, a.metrics, a.locks)
	a.locks.clients = a.srv.clients
	a.live.Store(&live{limits: cfg.Limits, acl: cfg.ACL})
	a.health = telemetry.NewHealth(time.Now, healthBeat, healthStale)
	cluster, err := quorum.New(quorum.Config{
		Masters: cfg.Masters, KeyPrefix: cfg.Lock.KeyPrefix, DriftFactor: cfg.Lock.DriftFactor,
		MasterTimeout: cfg.Lock.MasterTimeout, Quarantine: Quarantine(cfg.Lock), Tombstone: cfg.Lock.Lease,
		InstanceID: cfg.AgentID + "/" + a.instance, Clock: a.clock, Logger: log.Named("quorum"),
		Observer: a.metrics,
		Settings: ClusterSettings(cfg.Lock),
		OnRevoke: a.locks.onRevoke,
	})
	if err != nil {
		return nil, err
	}
	a.cluster, a.locks.cluster, a.srv.cluster = cluster, cluster, cluster
	a.metrics.CollectState(cluster, func() int { return a.srv.counts().Sessions })
	a.watchdog = renewal.New(renewal.Config{
		Lease: cfg.Lock.Lease, DriftFactor: cfg.Lock.DriftFactor, Masters: cluster.Size(),
		Renewer: a.metrics.ObservedRenewer(cluster), OnLost: a.health.OnLost(a.locks.onLost), Clock: a.clock, Logger: log.Named("renewal"),
	})
	a.locks.watchdog = a.watchdog
	return a, nil
}

// Ready is closed once the socket is listening.
func (a *Agent) Ready() <-chan struct{} { return a.ready }

// SocketPath returns where the agent listens.
func (a *Agent) SocketPath() string { return a.cfg.Socket.Path }

// Run listens on the socket, connects the masters and serves until ctx ends.
// Then it stops in order: no new sessions; every session is told LOST and BYE
// and its holds are released in the masters; then the watchdog and the
// masters' connections stop. It returns an error only if it could not start.
func (a *Agent) Run(ctx context.Context) error {
	ln, fromSystemd, err := socket.Listen(a.cfg.Socket.Path, a.cfg.Socket.Mode, a.cfg.Socket.Group)
	if err != nil {
		return err
	}
	a.ln = ln
	a.log.Info("listening", "socket", a.cfg.Socket.Path, "from_systemd", fromSystemd, "masters", a.cluster.Size(), "quorum", a.cluster.Quorum(), "tolerates", a.srv.tolerates())
	a.warnNoFaultTolerance()

	backCtx, stopBack := context.WithCancel(context.WithoutCancel(ctx))
	var back sync.WaitGroup
	probe := func(ctx context.Context) error { return a.health.ProbeWatchdog(ctx, a.watchdog, a.clock) }
	trimmer := memory.NewTrimmer(a.log.Named("memory"))
	for _, run := range []func(context.Context) error{a.cluster.Run, a.watchdog.Run, probe, trimmer.Run, a.locks.noteCaches} {
		back.Add(1)
		go func() {
			defer back.Done()
			run(backCtx)
		}()
	}
	revocations := a.cluster.WatchRevocations(backCtx) // see onRevoke
	defer revocations.Close()
	a.locks.start(backCtx)
	a.srv.start(backCtx)
	close(a.ready)

	acceptDone := make(chan struct{})
	go func() {
		defer close(acceptDone)
		a.accept()
	}()
	<-ctx.Done()
	a.log.Info("stopping: releasing every hold")
	ln.Close()
	<-acceptDone
	a.shutdown()
	stopBack()
	back.Wait()
	a.log.Info("stopped")
	return nil
}

func (a *Agent) accept() {
	for {
		// The deadline turns the loop even when nobody connects: each
		// turn is its beat (see health).
		a.ln.SetDeadline(time.Now().Add(a.health.Every))
		conn, err := a.ln.AcceptUnix()
		a.health.Beat(telemetry.LoopAccept)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if errors.Is(err, os.ErrDeadlineExceeded) {
				continue
			}
			a.log.Warn("accept failed", "error", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		a.srv.open(conn)
	}
}

// shutdown pushes LOST and BYE to every session, closes them, and waits
// (bounded) until each released its holds.
func (a *Agent) shutdown() {
	grace := time.NewTimer(shutdownGrace)
	defer grace.Stop()
	a.locks.stop()
	a.srv.closeAll(grace.C)
	cached := make(chan struct{})
	go func() {
		a.locks.releaseCaches()
		close(cached)
	}()
	t := time.NewTimer(cacheReleaseGrace)
	defer t.Stop()
	select {
	case <-cached:
	case <-t.C:
		a.log.Warn("cached names were not released in time; their leases will expire")
	}
}

// cacheReleaseGrace bounds how long a stopping agent waits for its cached
// names' release, after its sessions': a master that does not answer would
// keep it for max(20×master_timeout, 1s).
const cacheReleaseGrace = 500 * time.Millisecond

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// How often each of the agent's loops proves it turns, and how long a loop
// may stay silent before it counts as wedged (see telemetry.Health). These
// are variables so tests can shorten them before New.
var (
	healthBeat  = time.Second
	healthStale = 3 * time.Second
)

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
	c := a.srv.counts()
	s := systemd.Stats{Masters: a.cluster.Size(), Quorum: a.cluster.Quorum(), Sessions: c.Sessions, Holds: c.Holds, Waiters: c.Waiters}
	for _, m := range a.cluster.Status() {
		if m.State == quorum.StateUp {
			s.MastersUp++
		}
	}
	return s
}

// SetLive applies cfg's limits and access rules to the running agent; the
// rest of cfg is ignored (it takes a restart). Requests that arrive after
// it returns see them. What was admitted before is kept: sessions, holds
// and waits over a lowered limit, or that new rules would deny, go on
// until they end; a session's idle_timeout is measured anew.
func (a *Agent) SetLive(cfg Config) {
	old := a.live.Swap(&live{limits: cfg.Limits, acl: cfg.ACL})
	if old.limits.IdleTimeout == cfg.Limits.IdleTimeout {
		return
	}
	for _, s := range a.srv.openSessions() {
		s.armIdle()
	}
}

// warnNoFaultTolerance says, at start, what an agent whose masters
// tolerate no failure gives up: with its only master (or either of two)
// down, every LOCK is answered NO_QUORUM and every hold is LOST; restarted
// empty, that master sits out its quarantine (one lease + drift) before it
// votes again, so for that long too the agent grants nothing. Holds stay
// safe through such a restart only because of that quarantine.
func (a *Agent) warnNoFaultTolerance() {
	if a.srv.tolerates() > 0 {
		return
	}
	a.log.Warn("these masters tolerate no failure: with one of them down every LOCK gets NO_QUORUM and every hold is lost; "+
		"one restarted empty sits out its quarantine (one lease + drift), and the agent grants nothing meanwhile; "+
		"use three masters to tolerate one failure, five for two",
		"masters", a.cluster.Size(), "quorum", a.cluster.Quorum(), "quarantine", Quarantine(a.cfg.Lock))
}
