// Package quorum runs the RedLock algorithm over N independent Redis masters:
// Lua scripts that acquire, renew, release and read a name on one master; a
// parallel fan-out with a per-master deadline; the validity math; fencing
// tokens that grow across agents; and the release channels that wake waiters.
//
// A file per concept:
//
//	cluster.go     the Cluster: Config, New, Run, status; the model's hooks
//	round.go       the round: one script on every master, answers to an outcome
//	acquire.go     Acquire (the claim scripts' caller), fence write-back, Reserve
//	claim.go       claims, records, holders: Who, Retag
//	hold.go        a hold's life after its grant: renew, repair, release, tails, revoke
//	cache.go       keeping a record in the masters after its last local holder
//	waiters.go     who waits in the masters: the fair queue and waiting records
//	watch.go       a name's channel: Watch, wants, the leader, values, fence checks
//	gate.go        the epoch/quarantine gate, the tail horizon, a master's data and safety
//	settings.go    the settings a marker records; bootstrap and change
//	master.go      one master: its connections, the transport interface, batches
//	standalone.go  the transport of a master that is one server (and its Sentinels)
//	shards.go      the transport of a master that is a Redis Cluster
//	errors.go      the errors callers test for
//
// and packages beside it: rules (the pure rules: majorities, validity,
// fences, the tail horizon), scripts (the Lua files and their registry),
// keyspace (every key and channel name), hashslot (Redis Cluster slots) and
// clock (the time source of lease logic).
package quorum

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/lock-agent/lock-agent/quorum/clock"
	"github.com/lock-agent/lock-agent/quorum/keyspace"
	"github.com/lock-agent/lock-agent/quorum/rules"
	"github.com/lock-agent/lock-agent/quorum/scripts"
)

// Config configures a Cluster. Zero durations take the defaults noted.
type Config struct {
	Masters []MasterConfig
	// KeyPrefix starts every key, e.g. "lock-agent:".
	KeyPrefix string
	// DriftFactor is the clock drift allowance as a fraction of a lease.
	DriftFactor float64
	// MasterTimeout bounds one operation on one master; default 50ms.
	MasterTimeout time.Duration
	// ProbeInterval is how often each master's health is probed; default 200ms.
	ProbeInterval time.Duration
	// SafetyInterval is how often each master's configuration is checked
	// for what makes it unsafe (see UnsafeError); default 5s.
	SafetyInterval time.Duration
	// Quarantine is how long a master that lost its data does not vote,
	// counted on its own clock from when an agent first meets it empty: at
	// least the longest lease (watchdog lease or ttl=) any agent grants,
	// plus drift. Default 15s. While tails stand on the other masters it
	// is lengthened until they end (see the tail horizon in gate.go).
	Quarantine time.Duration
	// Settings are the settings this agent's safety depends on, recorded
	// in every master's marker (see Settings); a master that records others
	// does not vote for this agent. Empty: none (a marker that records none
	// matches).
	Settings Settings
	// Tombstone is how long the tombstone of a release that overtook its
	// acquire lasts: longer than a command can sit in a connection. Default 15s.
	Tombstone time.Duration
	// MaxRounds bounds the rounds (acquire, extend, who) in flight at once;
	// more wait their turn, and a round's deadlines start only when it is
	// sent, so a burst is queued instead of timing out. Default 64.
	MaxRounds int
	// AdmitTimeout bounds how long a round waits for its turn before it
	// fails with ErrOverloaded. Waiting costs a round nothing (its validity
	// counts from when it is sent). Default 1m.
	AdmitTimeout time.Duration
	// InstanceID names this agent instance in the masters' data markers.
	InstanceID string
	Clock      clock.Clock // default clock.Real
	// HostWaited is the host's total time with a task waiting for a CPU,
	// and whether it is known (the agent's is internal/hostcpu.Waited): a
	// round does not count a master's silence while the host is short of
	// CPU (see hostWait). Nil: unknown, a round counts its own stalls only.
	HostWaited func() (time.Duration, bool)
	Logger     hclog.Logger // default a null logger
	// Observer hears of each master's latency, quarantines and fence
	// write-backs, for metrics; default NopObserver.
	Observer Observer
	// OnRevoke, if set, hears each revocation of a hold (see
	// Cluster.Revoke) by its holder id and the reason word, once per
	// master that delivers it, while WatchRevocations is open. It is
	// called from a master's subscriber and must not block.
	OnRevoke func(holder, reason string)
}

// Cluster is the set of masters and the quorum operations over them. Its
// methods are safe for concurrent use; Run must be running for masters to
// connect.
type Cluster struct {
	cfg     Config
	keys    keyspace.Prefix // cfg.KeyPrefix: every key and channel it uses (see package keyspace)
	clock   clock.Clock
	masters []*master
	quorum  int
	isDone  atomic.Bool
	rounds  chan struct{} // one token per round in flight: see MaxRounds
	// giveBack is the release message of this agent's failed rounds, which
	// its own waiters ignore.
	giveBack string
	epochs   atomic.Uint64 // numbers the epochs this agent may plant
	settings string        // cfg.Settings in the form the masters record
	// established is set once this agent saw a master vote: the
	// deployment has served, so a master that holds nothing lost its data
	// (see ClassifyData).
	established atomic.Bool
	// settingsDiffer is set while a majority records other settings than
	// this agent's (see noteSettings).
	settingsDiffer atomic.Bool

	// host is the newest reading of cfg.HostWaited (see sampleHost).
	host atomic.Pointer[hostSample]

	// clustered says a master is a Redis Cluster: batches of names are
	// then cut per hash slot (see shards.go).
	clustered bool

	// handover is this agent's release message after a run of local
	// holders that another agent waited for (see HandOver).
	handover string

	watchMu sync.Mutex
	watches map[string]*watchSet // by channel

	bgMu       sync.Mutex
	bgClosed   bool           // set once Run is stopping: no new background work
	background sync.WaitGroup // releases still in flight; Run waits for them

	// givingBack is, by name, this agent's give-backs of failed rounds
	// still in flight (see releaseAsync); an Acquire of the name waits for
	// them first.
	givingBackMu sync.Mutex
	givingBack   map[string]*giveBacks
	givingBackN  atomic.Int64 // len(givingBack): most acquires find none without the mutex
	// giveBackHook, if set (a test's), runs before each give-back.
	giveBackHook func()
}

// goBackground runs f in a goroutine that Run waits for before it closes the
// connections. Once Run is stopping it runs f inline instead: f is bounded by
// its own deadline, and a WaitGroup may not grow while it is waited on.
func (c *Cluster) goBackground(f func()) {
	c.bgMu.Lock()
	if c.bgClosed {
		c.bgMu.Unlock()
		f()
		return
	}
	c.background.Add(1)
	c.bgMu.Unlock()
	go func() {
		defer c.background.Done()
		f()
	}()
}

// MasterStatus is one master's health.
type MasterStatus struct {
	Name, Address string
	State         State
	Err           string // the last error, if any, in the agent's words
	// Unplanted says, while it shows as quarantined, that it has no marker
	// yet that this agent may plant (see ErrUnplanted): its quarantine has
	// not started, and QuarantineLeft says nothing.
	Unplanted bool
	// QuarantineLeft is, while quarantined, how long until it may vote.
	QuarantineLeft time.Duration
	// Data is, while quarantined, what the agent can tell of why it holds
	// nothing: new, lost its data, or cannot tell (see ClassifyData).
	Data Data
	// Settings are what its marker records, in the canonical form
	// (ParseSettings reads it); "" if none, or not probed yet.
	Settings string
	// Shards are, for a master that is a Redis Cluster, each shard's
	// state; nil for a standalone master.
	Shards []ShardStatus
}

// ShardStatus is one shard of a master that is a Redis Cluster.
type ShardStatus struct {
	Address string // its primary's
	Slots   string // the hash slots it serves, as "0-5460,6000"
	State   State  // up, down or quarantined
	Err     string // the last error, if any, in the agent's words
	// QuarantinedSlots is how many of its slots sit out a quarantine
	// (they lost their data), QuarantineLeft until the last ends.
	QuarantinedSlots int
	QuarantineLeft   time.Duration
}

// New returns a Cluster for cfg. It does not connect; Run does.
func New(cfg Config) (*Cluster, error) {
	if len(cfg.Masters) == 0 {
		return nil, errors.New("quorum: no masters")
	}
	if err := cfg.Settings.validate(); err != nil {
		return nil, err
	}
	if cfg.MasterTimeout <= 0 {
		cfg.MasterTimeout = 50 * time.Millisecond
	}
	if cfg.ProbeInterval <= 0 {
		cfg.ProbeInterval = 200 * time.Millisecond
	}
	if cfg.SafetyInterval <= 0 {
		cfg.SafetyInterval = 5 * time.Second
	}
	if cfg.Quarantine <= 0 {
		cfg.Quarantine = 15 * time.Second
	}
	if cfg.Tombstone <= 0 {
		cfg.Tombstone = 15 * time.Second
	}
	if cfg.MaxRounds <= 0 {
		cfg.MaxRounds = 64
	}
	if cfg.AdmitTimeout <= 0 {
		cfg.AdmitTimeout = time.Minute
	}
	if cfg.InstanceID == "" {
		cfg.InstanceID = randomID()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Observer == nil {
		cfg.Observer = NopObserver{}
	}
	c := &Cluster{cfg: cfg, keys: keyspace.Prefix(cfg.KeyPrefix), clock: cfg.Clock, quorum: rules.Majority(len(cfg.Masters)), watches: map[string]*watchSet{},
		rounds: make(chan struct{}, cfg.MaxRounds), giveBack: "give-back " + cfg.InstanceID,
		handover: handoverPrefix + cfg.InstanceID, settings: cfg.Settings.String()}
	for i, mc := range cfg.Masters {
		if len(mc.Cluster) > 0 && strings.ContainsAny(cfg.KeyPrefix, "{}") {
			return nil, fmt.Errorf("quorum: master %s is a Redis Cluster: the key prefix %q may not hold a hash tag ({ or })", mc.Name, cfg.KeyPrefix)
		}
		m := &master{cfg: mc, index: i, cluster: c, state: StateDown, lastErr: ErrNotConnected, connected: make(chan struct{}),
			log: cfg.Logger.Named("master").With("master", mc.Name)}
		m.acquires = batcher{m: m, many: scripts.AcquireMany}
		m.leanAcquires = batcher{m: m, many: scripts.AcquireLeanMany}
		m.releases = batcher{m: m, many: scripts.ReleaseMany, land: true}
		m.t = standalone{m}
		if len(mc.Cluster) > 0 {
			m.shards = newShardSet(m)
			m.t = sharded{m}
			c.clustered = true
		}
		c.masters = append(c.masters, m)
	}
	return c, nil
}

// Run connects to the masters and keeps them probed and subscribed until ctx
// ends, then closes every connection. Calling it twice is an error.
func (c *Cluster) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, m := range c.masters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.run(ctx)
		}()
	}
	<-ctx.Done()
	c.isDone.Store(true)
	wg.Wait()
	c.bgMu.Lock()
	c.bgClosed = true
	c.bgMu.Unlock()
	// Releases still in flight get a moment to land; past it, their leases
	// expire in the masters. A stopping agent must not hang on a master that
	// does not answer.
	waitFor(stopGrace, c.background.Wait)
	waitFor(closeGrace, func() { c.eachMaster(context.Background(), func(_ context.Context, m *master) { m.close() }) })
	return nil
}

// stopGrace bounds how long a stopping cluster waits for the answers of
// releases in flight (they are written already), and closeGrace how long it
// waits for its connections to close. With the agent's 2.5s for its sessions
// and 0.5s for its cached names (see agent.shutdownGrace) a stop takes
// about 4s, whatever the masters do. The price: releases that a busy but healthy master has not answered
// within half a second after the sessions' grace are left to expire, a
// lease later.
const (
	stopGrace  = 500 * time.Millisecond
	closeGrace = 500 * time.Millisecond
)

// waitFor runs f and waits for it at most d.
func waitFor(d time.Duration, f func()) {
	done := make(chan struct{})
	go func() {
		f()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

func (c *Cluster) closed() bool { return c.isDone.Load() }

// Quorum returns how many masters must agree.
func (c *Cluster) Quorum() int { return c.quorum }

// Size returns the number of masters.
func (c *Cluster) Size() int { return len(c.masters) }

// Status returns every master's health, in configuration order.
func (c *Cluster) Status() []MasterStatus {
	out := make([]MasterStatus, len(c.masters))
	data := c.data()
	for i, m := range c.masters {
		out[i] = m.status()
		if out[i].State == StateQuarantined {
			out[i].Data = data[i]
		}
	}
	return out
}

func (c *Cluster) eachMaster(ctx context.Context, f func(context.Context, *master)) {
	ctx, cancel := context.WithTimeout(ctx, 4*c.cfg.MasterTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, m := range c.masters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(ctx, m)
		}()
	}
	wg.Wait()
}

func randomID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// The Model* hooks below are the narrow surface that the protocol's model checker
// (internal/model) reads: the scripts and the arguments a Cluster sends to
// one master, built by the functions the agent itself uses, so that a change
// to a script or to its arguments reaches the model in one place. Nothing
// here talks to a master; the agent does not call it. The pure rules the
// model decides with (DecideSlots, SettleFence) are quorum/rules', which the
// agent uses too.

// ScriptCall is one script call as a Cluster would send it to one master:
// the Lua source that EVAL runs and its KEYS and ARGV. Src is the variant
// whose gate reads the server's run_id (what a master that restarted runs:
// see scripts.Script.AfterRestart), so the model needs no script cache.
type ScriptCall struct {
	Src        string
	Keys, Args []string
}

// modelCall is s's call on master i with keys and args, its gate's epoch
// argument completed as master i's calls carry it, and, for a script that
// runs the gate, its gate argument (which follows the epoch argument) made
// with mayPlant: the model agent's decision (MayPlant over what its probes
// saw, which is part of the model's state), not the Cluster's (which never
// probes).
func (c *Cluster) modelCall(i int, s *scripts.Script, keys, args []string, mayPlant bool) ScriptCall {
	if s.GateArg >= 0 {
		args[s.GateArg+1] = c.gateArg(mayPlant)
	}
	return ScriptCall{Src: s.Fallback().Src, Keys: keys, Args: c.masters[i].gateArgs(s, args)}
}

// ModelAcquire is the acquire script's call on master i for req, as Acquire
// sends it from an agent that may plant (see MayPlant) or not: the lean
// script for a lean request (see AcquireRequest.lean). For the model
// checker only.
func (c *Cluster) ModelAcquire(i int, req AcquireRequest, mayPlant bool) ScriptCall {
	s, keys, args := c.acquireCall(req)
	return c.modelCall(i, s, keys, args, mayPlant)
}

// ModelRenew is the renew script's call on master i for holds, as the
// watchdog's Renew sends it (one batch) from an agent that may plant or
// not. For the model checker only.
func (c *Cluster) ModelRenew(i int, lease time.Duration, holds []RenewKey, mayPlant bool) ScriptCall {
	keys, args := c.renewArgs(lease, holds)
	return c.modelCall(i, scripts.Renew, keys, args, mayPlant)
}

// ModelRepair is the repair script's call on master i that re-creates
// hold (its Record as the Grant gave it) with lease, as the watchdog's Renew
// sends it to a master that answered the hold is gone while a majority
// renewed it, from an agent that may plant or not. For the model checker
// only.
func (c *Cluster) ModelRepair(i int, lease time.Duration, hold RenewKey, mayPlant bool) ScriptCall {
	k := c.repairCall(strconv.FormatInt(lease.Milliseconds(), 10), hold)
	return c.modelCall(i, scripts.Repair, k.keys, k.args, mayPlant)
}

// ModelRelease is the release script's call on master i that gives back
// holder's hold of name, as Release sends it. For the model checker only.
func (c *Cluster) ModelRelease(i int, name, holder string) ScriptCall {
	keys, args := c.releaseArgs(name, holder, name)
	return c.modelCall(i, scripts.Release, keys, args, false)
}

// ModelRaiseFence is the fence write-back's call on master i: name's
// counter raised to the end of fence's block, and holder's record made to
// carry fence, as a won acquire sends it to the masters behind its fence
// (see settleFence). For the model checker only.
func (c *Cluster) ModelRaiseFence(i int, name, holder string, fence, block int64) ScriptCall {
	keys, args := c.raiseFenceArgs(name, c.keys.Holder(name, holder), fence, block, false)
	return c.modelCall(i, scripts.RaiseFence, keys, args, false)
}

// ModelBootstrap is the call that plants an epoch marker with no
// quarantine, recording this agent's settings, on a new master (see
// BootstrapSettings). For the model checker only.
func (c *Cluster) ModelBootstrap(i int) ScriptCall {
	return c.modelCall(i, scripts.Bootstrap, []string{c.keys.Marker()}, []string{"bootstrap:model", c.settings}, false)
}

// ModelProbe is the health probe's call on master i (the gate, which plants
// a quarantined marker on a master that has none, and re-plants one that
// records other settings), as the probe sends it from an agent whose probes
// saw the markers as mayPlant and replant say (see MayPlant, Replant). For
// the model checker only.
func (c *Cluster) ModelProbe(i int, mayPlant, replant bool) ScriptCall {
	flag := "0"
	if replant {
		flag = "1"
	}
	args := append(c.gateArgs(), flag)
	return c.modelCall(i, scripts.Marker, []string{c.keys.Marker()}, args, mayPlant)
}

// ModelProbeView is what an agent's probe makes of the probe's reply (see
// scripts/lua/marker.lua): recorded is the settings the marker records, refusal the
// reply's refusal word and what follows. ok is false for a reply the probe
// counts as a failed probe, which leaves the view as it was.
func (c *Cluster) ModelProbeView(recorded, refusal string) (view rules.MarkerView, ok bool) {
	mk := markerReply{recorded: recorded}
	if err := mk.readRefusal(refusal, c.cfg.Settings, nil); err != nil {
		return rules.ViewUnknown, false
	}
	return ClassifyMarker(mk.refusal, mk.recorded, c.settings), true
}
