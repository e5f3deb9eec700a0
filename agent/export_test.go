package agent

import (
	"sync"
	"time"

	"github.com/lock-agent/lock-agent/agent/outbox"
	"github.com/lock-agent/lock-agent/agent/telemetry"
)

// SetHealthTiming shortens how often the agents New makes beat and when
// a loop counts as wedged, until the test ends.
func SetHealthTiming(t interface{ Cleanup(func()) }, beat, stale time.Duration) {
	oldBeat, oldStale := healthBeat, healthStale
	healthBeat, healthStale = beat, stale
	t.Cleanup(func() { healthBeat, healthStale = oldBeat, oldStale })
}

// Wedge makes the loop named loop (see telemetry.Loop.String) block at its next beat
// until the returned release is called (or the test ends); parked is closed
// once the loop is blocked there.
func Wedge(t interface{ Cleanup(func()) }, loop string) (parked <-chan struct{}, release func()) {
	released, blocked := make(chan struct{}), make(chan struct{})
	var park sync.Once
	telemetry.SetWedgeHook(func(l string) {
		if l == loop {
			park.Do(func() { close(blocked) })
			<-released
		}
	})
	var once bool
	release = func() {
		if !once {
			once = true
			telemetry.SetWedgeHook(nil)
			close(released)
		}
	}
	t.Cleanup(release)
	return blocked, release
}

// OutQueue is how many lines a session queues for its writer before it
// stops reading the client's requests.
const OutQueue = outbox.Queue

// QueuedLines is the most lines any session of a has waiting for its writer.
func QueuedLines(a *Agent) int { return a.srv.QueuedLines() }

// OpenSessions is how many of a's sessions are neither closed nor told BYE:
// a session counts no more from the moment its BYE is queued.
func OpenSessions(a *Agent) int { return a.srv.Unsaid() }

// StandBack makes the contender of name stand back until until, as the end
// of a run of local holders that another agent waited for does (see
// agent/locks/cohort.go). It says false if name has no queue.
func StandBack(a *Agent, name string, until time.Time) bool { return a.locks.StandBack(name, until) }

// Names is the names a keeps a record of (see agent/locks/name.go), each
// with the parts of its record that are set.
func Names(a *Agent) []string { return a.locks.Names() }

// Lending is how a lends name to its local holders now: "run" (a run
// while local waiters queue), "linger" (a cache after the last holder),
// or "" (it lends nothing). A test waits on it, not on which goroutines
// run: the binary's goroutines include those of other tests' agents.
func Lending(a *Agent, name string) string { return a.locks.Lending(name) }
