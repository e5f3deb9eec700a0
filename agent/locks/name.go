// Package locks is the agent's lock manager: one record per name of all
// the agent knows of it (its holders, its waiters in arrival order, the
// record it lends to local holders, its observers), the contenders that
// try the masters for the names' waiters, and the holds' life in the
// watchdog. The server (agent/server) calls it through its Manager's
// methods and is called back through Client; the agent composes the two.
package locks

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/lock-agent/lock-agent/agent/telemetry"
	"github.com/lock-agent/lock-agent/internal/buildinfo"
	"github.com/lock-agent/lock-agent/internal/lockorder"
	"github.com/lock-agent/lock-agent/protocol"
	"github.com/lock-agent/lock-agent/quorum"
	"github.com/lock-agent/lock-agent/quorum/clock"
	"github.com/lock-agent/lock-agent/renewal"
)

// One record per name. Everything this agent knows of one name lives in its
// name record, in manager.names: the live exclusive lock it holds of it, the
// waiters it queues for it, the record it lends to its local holders (a
// run or a linger: see lend.go), the notify=wanted holds that hear of other
// agents' waiters, its waiting record on the masters, and the sessions that
// observe it. A record is made by the first of these that needs one
// (nameLocked) and retired by the last to let go (tidyLocked): a name used
// once leaves nothing behind.
//
// What is not here, and why:
//   - A hold is made by the manager (StartHold, lendLocked) but kept by its
//     session (agent/server's session.holds, by name and owner), which asks it through its
//     methods: the name points at its live exclusive one (locked), and the
//     watchdog's record at its live holder (renewal.Hold.Owner).
//   - The names each session observes (manager.observing) are an index of
//     the observations by session, kept by Observe and unobserveLocked
//     alone, for a session's limit and its close.
//   - The names this agent released lately, and those other agents wanted
//     lately (manager.released, manager.shared: see cache.go), are a bounded
//     history of names that have no state left here, kept for a window: a
//     record retired when empty cannot hold them.

// Manager is the lock manager: the one record per name, and everything
// that runs on the masters for the names (the contenders, the watchdog's
// holds, the lendings, the observations). It reaches a session through
// Client (hold.go).
type Manager struct {
	cfg      Config
	log      hclog.Logger
	clock    clock.Clock
	cluster  *quorum.Cluster
	watchdog *renewal.Watchdog
	metrics  *Metrics
	instance string // the Agent's: holder ids of a restarted agent never collide
	// clients is a snapshot of the open sessions (see findHold).
	clients func() []Client

	mu lockorder.Mutex[lockorder.Manager] // after the session's mu: see the lock order at agent/server's session.mu
	// names is what this agent knows of each name it has any state of:
	// its one record per name.
	names map[string]*nameRecord
	// observing is the names each session observes (see watch.go).
	observing map[Client]map[string]*observation
	// waiters counts the LOCKs waiting in any queue, for max_waiters and
	// STATUS. The queues alone keep it, with the waiters gauges: joinLocked
	// adds a waiter, remove takes it out (waiters.go).
	waiters atomic.Int64
	// shared are the names other agents wanted lately, and released the
	// names this agent released to the masters lately: see cache.go.
	shared, released *recentNames
	// toNote are the caches whose lendings changed what the masters should
	// show of their records since the last batch (see NoteCaches).
	toNote []*lending
	// held counts the live holds (those a loss would reach), for STATUS:
	// kept by startHoldLocked and endHoldLocked alone.
	held     int
	attempts atomic.Uint64 // numbers every acquire attempt: see holderID
	// stopping: the agent is stopping; no LOCK joins a queue, nothing is
	// passed on or lent.
	stopping bool
	runCtx   context.Context
}

// Config is what the lock manager takes of the agent's config: its id, and
// the lock block's settings it works by (see agent.LockConfig).
type Config struct {
	AgentID                                                              string
	Lease, MasterTimeout, RetryMin, RetryMax, CacheLinger, CohortMaxHold time.Duration
	DriftFactor                                                          float64
	CohortMaxHandoffs                                                    int
	// MaxWaiters is max_waiters in force now: a SIGHUP may change it.
	MaxWaiters func() int
}

// New makes the lock manager of an agent whose holder ids carry instance.
// It works once Attach gave it the masters and the watchdog, and Start
// the context it runs under.
func New(cfg Config, log hclog.Logger, clk clock.Clock, m *Metrics, instance string) *Manager {
	return &Manager{cfg: cfg, log: log, clock: clk, metrics: m, instance: instance,
		names: map[string]*nameRecord{}, observing: map[Client]map[string]*observation{},
		shared:   newRecentNames(10*cfg.CacheLinger, maxShared),
		released: newRecentNames(cfg.CacheLinger, maxReleased)}
}

// Attach gives the manager the masters and the watchdog (which is made
// with the manager's OnLost), and how to find the open sessions (see
// findHold).
func (a *Manager) Attach(cluster *quorum.Cluster, watchdog *renewal.Watchdog, clients func() []Client) {
	a.cluster, a.watchdog, a.clients = cluster, watchdog, clients
}

// Start gives the manager the context its background work runs under.
func (a *Manager) Start(ctx context.Context) {
	a.mu.Lock()
	a.runCtx = ctx
	a.mu.Unlock()
}

// Stop refuses every LOCK that would join a queue from now on: the agent
// is stopping.
func (a *Manager) Stop() {
	a.mu.Lock()
	a.stopping = true
	a.mu.Unlock()
}

// Tally is the live holds and the waiting LOCKs, for STATUS.
func (a *Manager) Tally() (holds, waiters int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.held, int(a.waiters.Load())
}

// holderID returns a fresh holder id for one acquire attempt of a
// session+owner, unique across every agent anywhere. Releases of a failed or
// abandoned attempt run in the background; because no two attempts share an
// id, a late release can only ever delete the attempt it belongs to, never a
// newer grant to the same session+owner. (Re-entry is counted in the agent,
// so nothing needs the id to be stable.)
func (a *Manager) holderID(sessionID uint64, owner string) string {
	return fmt.Sprintf("%s/%s/%d/%s/%d", a.cfg.AgentID, a.instance, sessionID, owner, a.attempts.Add(1))
}

// Metrics records the agent's records (waiters, holds) in telemetry's
// series. The series themselves, their names and labels, are telemetry's.
type Metrics struct{ *telemetry.Metrics }

// NewMetrics makes the agent's metrics, with a series per master of masters.
func NewMetrics(masters []quorum.MasterConfig) *Metrics {
	return &Metrics{telemetry.NewMetrics(buildinfo.Get(), masters)}
}

func (m *Metrics) mode(mode protocol.Mode) *telemetry.ModeMetrics { return m.Mode(mode) }

// WaitAnswered records the answer to a LOCK that went through a queue.
func (m *Metrics) WaitAnswered(w *Waiter, r Result) {
	m.LockAnswered(w.req.Mode, w.joined, r.Count, r.Err)
}

func (m *Metrics) holdStarted(h *Hold) { m.HoldStarted(h.gaugeMode) }

// holdDowngraded moves a hold from the exclusive holds to the shared ones.
// manager.mu is held.
func (m *Metrics) holdDowngraded(h *Hold) {
	m.HoldDowngraded(h.gaugeMode)
	h.gaugeMode = protocol.Shared
}

func (m *Metrics) holdEnded(h *Hold) { m.HoldEnded(h.gaugeMode, h.granted) }

func (m *Metrics) cachedGrant()  { m.CachedGrants.Inc() }
func (m *Metrics) cacheGivenUp() { m.CacheGiveUps.Inc() }

// nameRecord is what this agent knows of one name. Its fields are guarded by
// manager.mu; each part has locks of its own besides (the queue's mu, ...).
type nameRecord struct {
	key string
	// queue is this agent's waiters for the name in arrival order, nil when
	// none wait; its contender retires it (see manager.head).
	queue *queue
	// locked is the live exclusive lock this agent holds of the name, the
	// one a local waiter may be passed (see lateRun). startHoldLocked and
	// endHoldLocked alone keep it.
	locked *Hold
	// lent is the record this agent lends to its local holders of the
	// name, a run or a linger (see lend.go); nil when none.
	lent *lending
	// wanted is the notify=wanted holds of the name (see watch.go).
	wanted *wantedName
	// waitRec is the name's waiting record on the masters (see waiters.go).
	waitRec *waitRecord
	// observation is the sessions that observe the name (see watch.go).
	observation *observation
	// lostRelease is this agent's lost holds of the name whose records
	// are yet to be released in the masters; nil when none (see
	// releasingLostLocked).
	lostRelease *lostRelease
}

// empty says whether n holds nothing: it may be retired.
func (n *nameRecord) empty() bool {
	return n.queue == nil && n.locked == nil && n.lent == nil &&
		n.wanted == nil && n.waitRec == nil && n.observation == nil && n.lostRelease == nil
}

// nameLocked is key's record, made if the agent had none. The caller puts
// something in it (or calls tidyLocked). manager.mu is held.
func (a *Manager) nameLocked(key string) *nameRecord {
	n := a.names[key]
	if n == nil {
		n = &nameRecord{key: key}
		a.names[key] = n
	}
	return n
}

// tidyLocked retires n once it holds nothing; every part of a record that
// lets go calls it. manager.mu is held.
func (a *Manager) tidyLocked(n *nameRecord) {
	if n.empty() && a.names[n.key] == n {
		delete(a.names, n.key)
	}
}

// queueLocked is key's queue of waiters, nil if none wait. manager.mu is held.
func (a *Manager) queueLocked(key string) *queue {
	if n := a.names[key]; n != nil {
		return n.queue
	}
	return nil
}

// lentLocked is the record key lends its local holders, nil if none.
// manager.mu is held.
func (a *Manager) lentLocked(key string) *lending {
	if n := a.names[key]; n != nil {
		return n.lent
	}
	return nil
}

// runLocked is key's run of local holders, nil if none. manager.mu is held.
func (a *Manager) runLocked(key string) *lending {
	if l := a.lentLocked(key); l != nil && l.policy == lendRun {
		return l
	}
	return nil
}

// cacheLocked is key's cache (a linger), nil if none. manager.mu is held.
func (a *Manager) cacheLocked(key string) *lending {
	if l := a.lentLocked(key); l != nil && l.policy == lendLinger {
		return l
	}
	return nil
}

// queueOf is key's queue of waiters, nil if none wait.
func (a *Manager) queueOf(key string) *queue {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.queueLocked(key)
}

// exclusiveLocked is the live exclusive lock this agent holds of key, nil
// if none. manager.mu is held.
func (a *Manager) exclusiveLocked(key string) *Hold {
	if n := a.names[key]; n != nil {
		return n.locked
	}
	return nil
}

// wantedLocked is key's notify=wanted holds, nil if none. manager.mu is held.
func (a *Manager) wantedLocked(key string) *wantedName {
	if n := a.names[key]; n != nil {
		return n.wanted
	}
	return nil
}
