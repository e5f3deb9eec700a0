package agent

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

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
//   - A hold is made by the manager (startHold, lendLocked) but kept by its
//     session (session.holds, by name and owner), which asks it through its
//     methods: the name points at its live exclusive one (locked), and the
//     watchdog's record at its live holder (renewal.Hold.Owner).
//   - The names each session observes (manager.observing) are an index of
//     the observations by session, kept by observe and unobserveLocked
//     alone, for a session's limit and its close.
//   - The names this agent released lately, and those other agents wanted
//     lately (manager.released, manager.shared: see cache.go), are a bounded
//     history of names that have no state left here, kept for a window: a
//     record retired when empty cannot hold them.

// manager is the lock manager: the one record per name, and everything
// that runs on the masters for the names (the contenders, the watchdog's
// holds, the lendings, the observations). The server reaches it through
// locks (session.go); it reaches a session through client (hold.go).
type manager struct {
	cfg      Config
	live     *atomic.Pointer[live] // the Agent's: what a SIGHUP changes
	log      hclog.Logger
	clock    clock.Clock
	cluster  *quorum.Cluster
	watchdog *renewal.Watchdog
	metrics  *metrics
	instance string // the Agent's: holder ids of a restarted agent never collide
	// clients is a snapshot of the open sessions (see findHold).
	clients func() []client

	mu lockorder.Mutex[lockorder.Agent] // manager.mu: after session.mu, see the lock order there
	// names is what this agent knows of each name it has any state of:
	// its one record per name.
	names map[string]*nameRecord
	// observing is the names each session observes (see watch.go).
	observing map[client]map[string]*observation
	// waiters counts the LOCKs waiting in any queue, for max_waiters and
	// STATUS. The queues alone keep it, with the waiters gauges: joinLocked
	// adds a waiter, remove takes it out (waiters.go).
	waiters atomic.Int64
	// shared are the names other agents wanted lately, and released the
	// names this agent released to the masters lately: see cache.go.
	shared, released *recentNames
	// toNote are the caches whose lendings changed what the masters should
	// show of their records since the last batch (see noteCaches).
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

func newManager(cfg Config, live *atomic.Pointer[live], log hclog.Logger, clk clock.Clock, m *metrics, instance string) *manager {
	return &manager{cfg: cfg, live: live, log: log, clock: clk, metrics: m, instance: instance,
		names: map[string]*nameRecord{}, observing: map[client]map[string]*observation{},
		shared:   newRecentNames(10*cfg.Lock.CacheLinger, maxShared),
		released: newRecentNames(cfg.Lock.CacheLinger, maxReleased)}
}

// limits are the limits in force now.
func (a *manager) limits() Limits { return a.live.Load().limits }

// start gives the manager the context its background work runs under.
func (a *manager) start(ctx context.Context) {
	a.mu.Lock()
	a.runCtx = ctx
	a.mu.Unlock()
}

// stop refuses every LOCK that would join a queue from now on: the agent
// is stopping.
func (a *manager) stop() {
	a.mu.Lock()
	a.stopping = true
	a.mu.Unlock()
}

// tally is the live holds and the waiting LOCKs, for STATUS.
func (a *manager) tally() (holds, waiters int) {
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
func (a *manager) holderID(sessionID uint64, owner string) string {
	return fmt.Sprintf("%s/%s/%d/%s/%d", a.cfg.AgentID, a.instance, sessionID, owner, a.attempts.Add(1))
}

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
// manager.mu is held.
func (m *metrics) holdDowngraded(h *hold) {
	m.HoldDowngraded(h.gaugeMode)
	h.gaugeMode = protocol.Shared
}

func (m *metrics) holdEnded(h *hold) { m.HoldEnded(h.gaugeMode, h.granted) }

func (m *metrics) lost(reason renewal.Reason) { m.Lost(reason) }

func (m *metrics) cachedGrant()  { m.CachedGrants.Inc() }
func (m *metrics) cacheGivenUp() { m.CacheGiveUps.Inc() }

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
	locked *hold
	// lent is the record this agent lends to its local holders of the
	// name, a run or a linger (see lend.go); nil when none.
	lent *lending
	// wanted is the notify=wanted holds of the name (see watch.go).
	wanted *wantedName
	// waitRec is the name's waiting record on the masters (see waiters.go).
	waitRec *waitRecord
	// observation is the sessions that observe the name (see watch.go).
	observation *observation
}

// empty says whether n holds nothing: it may be retired.
func (n *nameRecord) empty() bool {
	return n.queue == nil && n.locked == nil && n.lent == nil &&
		n.wanted == nil && n.waitRec == nil && n.observation == nil
}

// nameLocked is key's record, made if the agent had none. The caller puts
// something in it (or calls tidyLocked). manager.mu is held.
func (a *manager) nameLocked(key string) *nameRecord {
	n := a.names[key]
	if n == nil {
		n = &nameRecord{key: key}
		a.names[key] = n
	}
	return n
}

// tidyLocked retires n once it holds nothing; every part of a record that
// lets go calls it. manager.mu is held.
func (a *manager) tidyLocked(n *nameRecord) {
	if n.empty() && a.names[n.key] == n {
		delete(a.names, n.key)
	}
}

// queueLocked is key's queue of waiters, nil if none wait. manager.mu is held.
func (a *manager) queueLocked(key string) *queue {
	if n := a.names[key]; n != nil {
		return n.queue
	}
	return nil
}

// lentLocked is the record key lends its local holders, nil if none.
// manager.mu is held.
func (a *manager) lentLocked(key string) *lending {
	if n := a.names[key]; n != nil {
		return n.lent
	}
	return nil
}

// runLocked is key's run of local holders, nil if none. manager.mu is held.
func (a *manager) runLocked(key string) *lending {
	if l := a.lentLocked(key); l != nil && l.policy == lendRun {
		return l
	}
	return nil
}

// cacheLocked is key's cache (a linger), nil if none. manager.mu is held.
func (a *manager) cacheLocked(key string) *lending {
	if l := a.lentLocked(key); l != nil && l.policy == lendLinger {
		return l
	}
	return nil
}

// queueOf is key's queue of waiters, nil if none wait.
func (a *manager) queueOf(key string) *queue {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.queueLocked(key)
}

// exclusiveLocked is the live exclusive lock this agent holds of key, nil
// if none. manager.mu is held.
func (a *manager) exclusiveLocked(key string) *hold {
	if n := a.names[key]; n != nil {
		return n.locked
	}
	return nil
}

// wantedLocked is key's notify=wanted holds, nil if none. manager.mu is held.
func (a *manager) wantedLocked(key string) *wantedName {
	if n := a.names[key]; n != nil {
		return n.wanted
	}
	return nil
}

// The errors the manager and the server answer with.

// errAgentStopping refuses new sessions and requests, and ends waits,
// while the agent stops.
var errAgentStopping = protocol.Errorf(protocol.ErrShuttingDown, "agent is stopping")

// quorumError is the answer for err from a round of the masters: a closed
// cluster (the agent is stopping) is SHUTTING_DOWN, a majority that records
// other settings SETTINGS, anything else NO_QUORUM. The chain is kept, so
// callers can still ask what it was.
func quorumError(err error) error {
	if errors.Is(err, quorum.ErrClosed) {
		return &protocol.Error{Err: protocol.ErrShuttingDown, Msg: "agent is stopping", Cause: err}
	}
	// Kind, not errors.Is: a round that missed a majority for other causes
	// also wraps the refusals of masters that record other settings.
	if re := (*quorum.RoundError)(nil); errors.As(err, &re) && re.Kind == quorum.ErrSettings {
		return &protocol.Error{Err: protocol.ErrSettings, Msg: err.Error(), Cause: err}
	}
	return &protocol.Error{Err: protocol.ErrNoQuorum, Msg: err.Error(), Cause: err}
}
