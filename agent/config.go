package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/lock-agent/lock-agent/agent/acl"
	"github.com/lock-agent/lock-agent/quorum"
	"github.com/lock-agent/lock-agent/quorum/clock"
)

// Config is the agent's validated configuration. Start from Default or Dev;
// package config turns a config file into one.
type Config struct {
	// AgentID names this agent in the masters; default the host name.
	AgentID string
	Socket  SocketConfig
	Masters []quorum.MasterConfig
	Lock    LockConfig
	Limits  Limits
	Log     LogConfig
	// ACL is the access rules by peer credentials; nil (no acl block)
	// lets whoever can open the socket do anything.
	ACL     *acl.ACL
	Systemd SystemdConfig
	// Telemetry is the opt-in metrics listener; off by default.
	Telemetry TelemetryConfig
	// Clock is the agent's time: back-off, wait= timers, cohort timing,
	// idle_timeout, and the leases' validity and renewal. nil (the default,
	// and what a config file gives) is the real clock; tests set a
	// clock.Fake.
	Clock clock.Clock
}

// SocketConfig is where and how the agent listens.
type SocketConfig struct {
	Path  string
	Mode  os.FileMode
	Group string // name or numeric id; "" keeps the agent's group
}

// LockConfig tunes the lock algorithm.
type LockConfig struct {
	// Lease is the watchdog lease, renewed every Lease/3.
	Lease         time.Duration
	KeyPrefix     string
	DriftFactor   float64
	MasterTimeout time.Duration
	// RetryMin and RetryMax bound the jittered back-off between attempts
	// that failed without a clear holder (split votes, unreachable masters).
	RetryMin, RetryMax time.Duration
	// MaxTTL is lock.max_ttl, which configs may still set (default 720h)
	// but which bounds nothing since ttl= is the client's up to
	// protocol.MaxTTL (30 days): a ttl= hold is renewed like any other
	// until its end, so its length costs the masters nothing (see
	// Quarantine and checkTTL). Deprecated.
	MaxTTL time.Duration
	// LockDelay is the delay= of a LOCK that gives none: how long its name
	// stays unavailable to everyone after the hold ends uncleanly (see
	// quorum.Tail). Default 0: none, and holds cost nothing more. At most
	// protocol.MaxDelay.
	LockDelay time.Duration
	// CohortMaxHandoffs is how many times a name held in the masters may be
	// passed from one local holder to the next local waiter on the fences of
	// one block (lock cohorting: see agent/locks/cohort.go): each grant, and each further
	// block a run reserves, takes that many fences more. While another agent
	// waits, a run ends within that many hand-overs; otherwise it may reserve
	// further blocks for up to refillFor. Default 128; 0 turns cohorting off.
	CohortMaxHandoffs int
	// CohortMaxHold bounds how long such a run of local holders keeps a name
	// while another agent waits for it: the first release after it is a real
	// one. Default 20ms; 0 turns cohorting off.
	CohortMaxHold time.Duration
	// CacheLinger is how long the agent keeps a name's record in the
	// masters after its last local holder let go with no local request
	// waiting (lock caching: see agent/locks/cache.go), so that its next local LOCK is
	// answered with no round on the masters; another agent that wants the
	// name ends it at once. Default 1s; 0 turns caching off.
	CacheLinger time.Duration
}

// Limits bound what clients can make the agent hold.
type Limits struct {
	MaxSessions        int
	MaxHoldsPerSession int
	MaxWaiters         int
	// MaxSessionsPerUID bounds the sessions of one peer uid (SO_PEERCRED),
	// so that one local user cannot take every session; default 1000.
	MaxSessionsPerUID int
	// IdleTimeout closes a session (with * BYE reason=idle) that has had no
	// hold, no wait and no request for that long; 0, the default, never does.
	IdleTimeout time.Duration
}

// LogConfig is the log level and format.
type LogConfig struct {
	Level  string // trace, debug, info, warn, error
	Format string // text or json
}

// SystemdConfig is how the agent talks to systemd when it runs as a
// Type=notify service; without NOTIFY_SOCKET it is unused.
type SystemdConfig struct {
	// ReadyTimeout is how long READY=1 waits for a quorum of masters once
	// the socket listens; then READY=1 is sent anyway, with STATUS= saying
	// there is no quorum. Default 30s.
	ReadyTimeout time.Duration
}

// DefaultSocketPath is where a production agent listens.
const DefaultSocketPath = "/run/lock-agent/agent.sock"

// Default returns the production defaults. It has no masters: a config file
// must name at least one.
func Default() Config {
	host, _ := os.Hostname()
	return Config{
		AgentID: host,
		Socket:  SocketConfig{Path: DefaultSocketPath, Mode: 0o660},
		Lock: LockConfig{Lease: 15 * time.Second, KeyPrefix: "lock-agent:", DriftFactor: 0.01,
			MasterTimeout: 50 * time.Millisecond, RetryMin: 20 * time.Millisecond, RetryMax: 200 * time.Millisecond,
			MaxTTL: 720 * time.Hour, CohortMaxHandoffs: 128, CohortMaxHold: 20 * time.Millisecond,
			CacheLinger: time.Second},
		Limits:  Limits{MaxSessions: 10000, MaxHoldsPerSession: 1000, MaxWaiters: 100000, MaxSessionsPerUID: 1000},
		Log:     LogConfig{Level: "info", Format: "text"},
		Systemd: SystemdConfig{ReadyTimeout: 30 * time.Second},
	}
}

// Dev returns the -dev configuration: the defaults, a socket in the user's
// runtime directory, and the given embedded masters.
func Dev(masterAddrs []string) Config {
	c := Default()
	c.Socket.Path = DevSocketPath()
	c.Socket.Mode = 0o600
	for i, a := range masterAddrs {
		c.Masters = append(c.Masters, quorum.MasterConfig{Name: fmt.Sprintf("dev%d", i+1), Address: a})
	}
	return c
}

// DevSocketPath is the socket of `run -dev`: $XDG_RUNTIME_DIR/lock-agent/agent.sock,
// or /tmp/lock-agent-UID/agent.sock.
func DevSocketPath() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "lock-agent", "agent.sock")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("lock-agent-%d", os.Getuid()), "agent.sock")
}

// TelemetryConfig is where the agent serves its metrics.
type TelemetryConfig struct {
	// PrometheusListen is the host:port of the listener that serves GET
	// /metrics. "" (the default) serves none: metrics are opt-in, and they
	// are never served on the client socket.
	PrometheusListen string
}

// Quarantine is how long a master that lost its data sits out: one lease,
// drift included, and the margins of a round. Every record on a master is
// a lease that the watchdog renews (a ttl= hold's too, until its end), so
// by then every hold the master voted for was either renewed on a majority
// without it, or has ended: its validity, counted from its last renewal on
// a majority, ran out, its holder told LOST a lead before. lock.max_ttl plays
// no part, so agents with other max_ttls agree on it.
func Quarantine(l LockConfig) time.Duration {
	return l.Lease + time.Duration(float64(l.Lease)*l.DriftFactor) + 2*l.MasterTimeout + 10*time.Millisecond
}

// ClusterSettings are the settings of l that the safety of every agent of
// a cluster depends on, as every master records them (see quorum.Settings):
// the lease and drift factor (validity), the quarantine they imply, and the
// cohort bounds (the fence block a grant reserves). An agent whose settings
// differ from those a majority of masters records grants nothing. The
// key prefix is not among them: agents with another prefix use other keys,
// another marker among them (see docs/operations.md).
func ClusterSettings(l LockConfig) quorum.Settings {
	return quorum.Settings{
		{Name: "lease", Value: l.Lease.String()},
		{Name: "drift", Value: strconv.FormatFloat(l.DriftFactor, 'g', -1, 64)},
		{Name: "quarantine", Value: Quarantine(l).String()},
		{Name: "cohort_hold", Value: l.CohortMaxHold.String()},
		{Name: "cohort_handoffs", Value: strconv.Itoa(l.CohortMaxHandoffs)},
	}
}
