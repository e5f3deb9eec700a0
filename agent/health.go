package agent

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/lock-agent/lock-agent/quorum"
	"github.com/lock-agent/lock-agent/renewal"
)

// The agent's liveness is that its own loops keep turning: each proves it
// by a beat from its own goroutine, so a wedged loop (blocked on a lock, a
// callback that never returns) falls silent even though the process runs.
//   - the accept loop wakes at least every healthBeat (a deadline on the
//     listener) and beats on every turn;
//   - the renewal watchdog is sent a probe every healthBeat: a ttl= hold
//     already due, which its goroutine expires and hands to OnLost, where
//     it is the beat. Probes never reach the masters or a session.
//
// These are variables so tests can shorten them before New.
var (
	healthBeat  = time.Second     // how often each loop proves it turns
	healthStale = 3 * time.Second // a loop silent this long is wedged
)

// wedgeHook, when set (only by tests: see export_test.go and
// wedge_testhook.go), is called on every beat from the loop's own
// goroutine and may block it, to play a wedged loop.
var wedgeHook atomic.Pointer[func(loop string)]

// A loop is one of the agent's long-lived loops whose liveness is watched.
type loop int

const (
	loopAccept loop = iota
	loopWatchdog
	loops
)

func (l loop) String() string {
	return [...]string{"accept loop", "renewal watchdog"}[l]
}

// health records when each loop last beat, on the monotonic clock.
type health struct {
	now          func() time.Time
	start        time.Time
	every, stale time.Duration
	last         [loops]atomic.Int64          // time since start of each loop's last beat
	probe        atomic.Pointer[renewal.Hold] // the watchdog's unanswered probe, if any
}

func newHealth(now func() time.Time) *health {
	return &health{now: now, start: now(), every: healthBeat, stale: healthStale}
}

// beat records a beat of l. It is called from l's own goroutine.
func (h *health) beat(l loop) {
	if wedge := wedgeHook.Load(); wedge != nil {
		(*wedge)(l.String())
	}
	h.last[l].Store(int64(h.now().Sub(h.start)))
}

// check returns nil if every loop beat within the last stale, else an
// error naming each silent loop and for how long it has been silent.
func (h *health) check() error {
	now := h.now().Sub(h.start)
	var silent []string
	for l := range loops {
		if quiet := now - time.Duration(h.last[l].Load()); quiet > h.stale {
			silent = append(silent, fmt.Sprintf("%v silent for %v", l, quiet.Truncate(100*time.Millisecond)))
		}
	}
	if silent == nil {
		return nil
	}
	return fmt.Errorf("%s", strings.Join(silent, ", "))
}

// onLost wraps the watchdog's OnLost: the probe is the watchdog's beat;
// every other hold goes on to lost.
func (h *health) onLost(lost func(*renewal.Hold, renewal.Reason)) func(*renewal.Hold, renewal.Reason) {
	return func(rh *renewal.Hold, reason renewal.Reason) {
		if rh == h.probe.Load() {
			h.beat(loopWatchdog)
			h.probe.Store(nil) // only now: a wedged beat must not bring more probes
			return
		}
		lost(rh, reason)
	}
}

// probeWatchdog keeps one probe in the watchdog until ctx ends: a new one
// every beat once the last was answered. An unanswered probe stays, so a
// wedged watchdog is not also flooded with probes.
func (h *health) probeWatchdog(ctx context.Context, w *renewal.Watchdog, clock quorum.Clock) error {
	t := time.NewTicker(h.every)
	defer t.Stop()
	for {
		if h.probe.Load() == nil {
			probe := &renewal.Hold{Name: "(health probe)", Fixed: true}
			h.probe.Store(probe)
			w.Add(probe, clock.Now()) // due at once: the watchdog expires it on its next turn
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Healthy returns nil if the agent's own loops (the accept loop, the
// renewal watchdog) all proved they turn within the last few seconds, else
// an error naming the ones that did not. It is what drives systemd's
// WATCHDOG=1 pings.
func (a *Agent) Healthy() error { return a.health.check() }

// Stats is a snapshot of the agent's masters and load.
type Stats struct {
	Masters   int // configured
	MastersUp int // up and voting
	Quorum    int // how many must agree
	Sessions  int
	Holds     int
	Waiters   int
}

// HasQuorum reports whether enough masters are up to grant a lock.
func (s Stats) HasQuorum() bool { return s.MastersUp >= s.Quorum }

// Stats returns a snapshot of the masters' states and the agent's counts.
func (a *Agent) Stats() Stats {
	c := a.counts()
	s := Stats{Masters: a.cluster.Size(), Quorum: a.cluster.Quorum(), Sessions: c.Sessions, Holds: c.Holds, Waiters: c.Waiters}
	for _, m := range a.cluster.Status() {
		if m.State == quorum.StateUp {
			s.MastersUp++
		}
	}
	return s
}
