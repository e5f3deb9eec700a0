package telemetry

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/lock-agent/lock-agent/quorum/clock"
	"github.com/lock-agent/lock-agent/renewal"
)

// The agent's liveness is that its own loops keep turning: each proves it
// by a beat from its own goroutine, so a wedged loop (blocked on a lock, a
// callback that never returns) falls silent even though the process runs.
//   - the accept loop wakes at least every Health.Every (a deadline on the
//     listener) and beats on every turn;
//   - the renewal watchdog is sent a probe every Health.Every: a ttl= hold
//     already due, which its goroutine expires and hands to OnLost, where
//     it is the beat. Probes never reach the masters or a session.

// wedgeHook, when set (only by tests: see SetWedgeHook and
// wedge_testhook.go), is called on every beat from the loop's own
// goroutine and may block it, to play a wedged loop.
var wedgeHook atomic.Pointer[func(loop string)]

// SetWedgeHook has every beat call wedge with the loop's name (see
// Loop.String) from the loop's own goroutine, where it may block to play a
// wedged loop; nil removes it. Only tests call it.
func SetWedgeHook(wedge func(loop string)) {
	if wedge == nil {
		wedgeHook.Store(nil)
		return
	}
	wedgeHook.Store(&wedge)
}

// A Loop is one of the agent's long-lived loops whose liveness is watched.
type Loop int

// The loops watched.
const (
	LoopAccept Loop = iota
	LoopWatchdog
	loops
)

func (l Loop) String() string {
	return [...]string{"accept loop", "renewal watchdog"}[l]
}

// Health records when each loop last beat, on the monotonic clock.
type Health struct {
	now   func() time.Time
	start time.Time
	// Every is how often each loop proves it turns; a loop silent for
	// more than stale is wedged.
	Every, stale time.Duration
	last         [loops]atomic.Int64          // time since start of each loop's last beat
	probe        atomic.Pointer[renewal.Hold] // the watchdog's unanswered probe, if any
}

// NewHealth returns a Health whose loops beat every every and are wedged
// once silent for longer than stale; now is the clock, and the loops count
// as having beaten at once.
func NewHealth(now func() time.Time, every, stale time.Duration) *Health {
	return &Health{now: now, start: now(), Every: every, stale: stale}
}

// Beat records a beat of l. It is called from l's own goroutine.
func (h *Health) Beat(l Loop) {
	if wedge := wedgeHook.Load(); wedge != nil {
		(*wedge)(l.String())
	}
	h.last[l].Store(int64(h.now().Sub(h.start)))
}

// Check returns nil if every loop beat within the last stale, else an
// error naming each silent loop and for how long it has been silent.
func (h *Health) Check() error {
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

// OnLost wraps the watchdog's OnLost: the probe is the watchdog's beat;
// every other hold goes on to lost.
func (h *Health) OnLost(lost func(*renewal.Hold, renewal.Loss)) func(*renewal.Hold, renewal.Loss) {
	return func(rh *renewal.Hold, loss renewal.Loss) {
		if rh == h.probe.Load() {
			h.Beat(LoopWatchdog)
			h.probe.Store(nil) // only now: a wedged beat must not bring more probes
			return
		}
		lost(rh, loss)
	}
}

// ProbeWatchdog keeps one probe in the watchdog until ctx ends: a new one
// every beat once the last was answered. An unanswered probe stays, so a
// wedged watchdog is not also flooded with probes.
func (h *Health) ProbeWatchdog(ctx context.Context, w *renewal.Watchdog, clock clock.Clock) error {
	t := time.NewTicker(h.Every)
	defer t.Stop()
	for {
		if h.probe.Load() == nil {
			probe := &renewal.Hold{Name: "(health probe)", Kind: renewal.KindFixed}
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
