// Package agent is lock-agent's daemon: it composes the socket server
// (agent/server: the sessions that tie holds to connections) with the lock
// manager (agent/locks: what the agent knows of each name, its holders,
// its waiters, the record it lends), over quorum (RedLock over the
// masters) and renewal (the watchdog).
//
//	agent.go      the Agent, the composition root: New, Run, the order of
//	              its stop; its health and metrics; what a SIGHUP changes
//	              (SetLive)
//	config.go     Config and its defaults, Quarantine, the settings every
//	              master records
//
// agent/server, the wire's side: a session keeps handles to its holds and
// waits, and the order of its replies, and asks the manager for the rest
// through a small interface (lockManager, session.go):
//
//	session.go    the Server; one connection: read, dispatch, idle_timeout,
//	              BYE, close; HELLO, PING, STATUS; the access checks
//	order.go      the order of a session's requests on a hold: turns, and
//	              the LOCK, UNLOCK, EXTEND, SET and WHO that take them
//	lock.go       LOCK: re-entry, a lent record, a wait; a multi-lock; a
//	              grant's hold installed in the session
//	verbs.go      every other verb: UNLOCK, EXTEND, CANCEL, HOLDS, WHO,
//	              REVOKE, SET, CHECK, OBSERVE, UNOBSERVE; a hold's undoing
//	              and its LOST, on the session's side
//
// agent/locks, the lock manager: it calls a session back only through
// locks.Client (hold.go), and imports nothing of the server's:
//
//	name.go       the Manager, and its one record per name
//	waiters.go    who waits: a LOCK's wait, the name's queue, its entries
//	              in the masters' fair queue, the waiting record WHO shows
//	contender.go  the goroutine that tries the masters for a queue's head
//	hold.go       a hold's life: grant, loss, release, tail, value; Client
//	lend.go       lending a record held in the masters to local holders,
//	              the lease/2 rule, the safety essay; its two policies:
//	cohort.go     a run, while local waiters queue
//	cache.go      a linger, after the last local holder let go
//	watch.go      a name's channel: WANTED pushes and LEADER to observers
//
// and packages beside them: outbox (a session's lines for its client), acl
// (access rules), socket (the listener, peer credentials), status (STATUS
// lines), telemetry (metrics, health), memory, systemd, and config (the
// config file, which builds a Config). The lock order that keeps the
// server and the manager straight is written at the session's mu
// (agent/server/session.go).
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
	"github.com/lock-agent/lock-agent/agent/locks"
	"github.com/lock-agent/lock-agent/agent/memory"
	"github.com/lock-agent/lock-agent/agent/server"
	"github.com/lock-agent/lock-agent/agent/socket"
	"github.com/lock-agent/lock-agent/agent/systemd"
	"github.com/lock-agent/lock-agent/agent/telemetry"
	"github.com/lock-agent/lock-agent/internal/buildinfo"
	"github.com/lock-agent/lock-agent/internal/hostcpu"
	"github.com/lock-agent/lock-agent/quorum"
	"github.com/lock-agent/lock-agent/quorum/clock"
	"github.com/lock-agent/lock-agent/renewal"
)

// Version is the agent's version, reported by HELLO and STATUS: the one
// stamped in at build time, "dev" if none was (see internal/buildinfo).
var Version = buildinfo.Get().Version

// MinTTL is the shortest ttl= a LOCK or EXTEND may ask for (see
// server.MinTTL).
const MinTTL = server.MinTTL

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
	cfg      Config // as at start; what a SIGHUP changes is in limits and the server's
	limits   atomic.Pointer[Limits]
	log      hclog.Logger
	clock    clock.Clock
	cluster  *quorum.Cluster
	watchdog *renewal.Watchdog
	metrics  *locks.Metrics
	instance string // random per process: holder ids of a restarted agent never collide

	health *telemetry.Health // liveness of the agent's own loops

	ln    *net.UnixListener
	ready chan struct{} // closed once listening

	// locks is the lock manager, srv the server: the sessions reach the
	// manager through the server's lockManager, it reaches them through
	// locks.Client.
	locks *locks.Manager
	srv   *server.Server
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
		metrics: locks.NewMetrics(cfg.Masters)}
	a.limits.Store(&cfg.Limits)
	a.locks = locks.New(locks.Config{AgentID: cfg.AgentID, Lease: cfg.Lock.Lease, MasterTimeout: cfg.Lock.MasterTimeout,
		RetryMin: cfg.Lock.RetryMin, RetryMax: cfg.Lock.RetryMax, CacheLinger: cfg.Lock.CacheLinger,
		CohortMaxHold: cfg.Lock.CohortMaxHold, DriftFactor: cfg.Lock.DriftFactor, CohortMaxHandoffs: cfg.Lock.CohortMaxHandoffs,
		MaxWaiters: func() int { return a.limits.Load().MaxWaiters }}, log, clk, a.metrics, a.instance)
	a.health = telemetry.NewHealth(time.Now, healthBeat, healthStale)
	cluster, err := quorum.New(quorum.Config{
		Masters: cfg.Masters, KeyPrefix: cfg.Lock.KeyPrefix, DriftFactor: cfg.Lock.DriftFactor,
		MasterTimeout: cfg.Lock.MasterTimeout, Quarantine: Quarantine(cfg.Lock), Tombstone: cfg.Lock.Lease,
		InstanceID: cfg.AgentID + "/" + a.instance, Clock: a.clock, HostWaited: hostcpu.Waited, Logger: log.Named("quorum"),
		Observer: a.metrics,
		Settings: ClusterSettings(cfg.Lock),
		OnRevoke: a.locks.OnRevoke,
	})
	if err != nil {
		return nil, err
	}
	a.cluster = cluster
	a.srv = server.New(server.Config{AgentID: cfg.AgentID, Version: Version, LockDelay: cfg.Lock.LockDelay,
		Settings: ClusterSettings(cfg.Lock).String(), RevokeBound: revokeBound(cfg.Lock)},
		serverLimits(cfg.Limits), cfg.ACL, log, clk, cluster, a.metrics, a.locks)
	a.metrics.CollectState(cluster, func() int { return a.srv.Counts().Sessions })
	a.watchdog = renewal.New(renewal.Config{
		Lease: cfg.Lock.Lease, DriftFactor: cfg.Lock.DriftFactor, Masters: cluster.Size(),
		Renewer: a.metrics.ObservedRenewer(cluster), OnLost: a.health.OnLost(a.locks.OnLost), Clock: a.clock, Logger: log.Named("renewal"),
	})
	a.locks.Attach(cluster, a.watchdog, a.srv.Clients)
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
	a.log.Info("listening", "socket", a.cfg.Socket.Path, "from_systemd", fromSystemd, "masters", a.cluster.Size(), "quorum", a.cluster.Quorum(), "tolerates", a.srv.Tolerates())
	a.warnNoFaultTolerance()

	backCtx, stopBack := context.WithCancel(context.WithoutCancel(ctx))
	var back sync.WaitGroup
	probe := func(ctx context.Context) error { return a.health.ProbeWatchdog(ctx, a.watchdog, a.clock) }
	trimmer := memory.NewTrimmer(a.log.Named("memory"))
	for _, run := range []func(context.Context) error{a.cluster.Run, a.watchdog.Run, probe, trimmer.Run, a.locks.NoteCaches} {
		back.Add(1)
		go func() {
			defer back.Done()
			run(backCtx)
		}()
	}
	revocations := a.cluster.WatchRevocations(backCtx) // see locks.Manager.OnRevoke
	defer revocations.Close()
	a.locks.Start(backCtx)
	a.srv.Start(backCtx)
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
		a.srv.Open(conn)
	}
}

// shutdown pushes LOST and BYE to every session, closes them, and waits
// (bounded) until each released its holds.
func (a *Agent) shutdown() {
	grace := time.NewTimer(shutdownGrace)
	defer grace.Stop()
	a.locks.Stop()
	a.srv.CloseAll(grace.C)
	cached := make(chan struct{})
	go func() {
		a.locks.ReleaseCaches()
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
	c := a.srv.Counts()
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
	a.limits.Store(&cfg.Limits)
	a.srv.SetLive(serverLimits(cfg.Limits), cfg.ACL)
}

// serverLimits are the limits of l a session is held to.
func serverLimits(l Limits) server.Limits {
	return server.Limits{MaxSessions: l.MaxSessions, MaxSessionsPerUID: l.MaxSessionsPerUID,
		MaxHoldsPerSession: l.MaxHoldsPerSession, IdleTimeout: l.IdleTimeout}
}

// revokeBound is how long REVOKE waits for the holds it revoked to end: a
// revoked record that its agent does not end expires within a lease (it
// can no longer be renewed), and a bit.
func revokeBound(l LockConfig) time.Duration { return Quarantine(l) + time.Second }

// warnNoFaultTolerance says, at start, what an agent whose masters
// tolerate no failure gives up: with its only master (or either of two)
// down, every LOCK is answered NO_QUORUM and every hold is LOST; restarted
// empty, that master sits out its quarantine (one lease + drift) before it
// votes again, so for that long too the agent grants nothing. Holds stay
// safe through such a restart only because of that quarantine.
func (a *Agent) warnNoFaultTolerance() {
	if a.srv.Tolerates() > 0 {
		return
	}
	a.log.Warn("these masters tolerate no failure: with one of them down every LOCK gets NO_QUORUM and every hold is lost; "+
		"one restarted empty sits out its quarantine (one lease + drift), and the agent grants nothing meanwhile; "+
		"use three masters to tolerate one failure, five for two",
		"masters", a.cluster.Size(), "quorum", a.cluster.Quorum(), "quarantine", Quarantine(a.cfg.Lock))
}
