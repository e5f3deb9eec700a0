// Package history records what the clients of a fault test saw, on one
// monotonic clock, and checks it afterwards as Jepsen checks a history:
// no exclusive hold overlaps another hold of its name, a semaphore never
// exceeds its limit nor shares a slot, fences grow in grant order, and the
// service makes progress; and, for an election (leaders.go), that its
// observers are pushed the terms in order, rightly, and miss none.
package history

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Type is what happened to a client.
type Type int

const (
	// Invoke: the client sent a LOCK for the name.
	Invoke Type = iota
	// OK: the client read the LOCK's OK: from here it holds the name.
	OK
	// Fail: the client read a LOCK's refusal (BUSY, an ERR).
	Fail
	// Lost: the client read a * LOST for the hold: from here it does not
	// hold it.
	Lost
	// Release: the client sent the UNLOCK of the hold: from here it does
	// not hold it, whatever the UNLOCK answers.
	Release
	// Info is a note for whoever reads the history (a fault began or was
	// healed): the checker ignores it.
	Info
	// Observe: an observer read the OK of its OBSERVE: from here its
	// session sees the name's leader (see leaders.go).
	Observe
	// Leader: an observer read a * LEADER push: Fence, Value and Agent of
	// the leader it names, or Fence 0 for "none" (fences start at 1).
	Leader
	// Set: the holder sent a SET of a new value for its hold (Value; a
	// leader proclaiming): observers may be pushed it from here.
	Set
	// Unobserve: an observer's session stopped observing (it sent
	// UNOBSERVE, or its session ended: closed, its process or agent
	// killed).
	Unobserve
	// Ask: an observer sent its OBSERVE (a Leader() call began), recorded
	// right before sending: the first push its session reads must name the
	// leader as of this instant or later (see leaders.go, observer-stale).
	// Without it a session is taken to have asked at its Observe.
	Ask
)

func (t Type) String() string {
	switch t {
	case Invoke:
		return "invoke"
	case OK:
		return "ok"
	case Fail:
		return "fail"
	case Lost:
		return "lost"
	case Release:
		return "release"
	case Info:
		return "info"
	case Observe:
		return "observe"
	case Leader:
		return "leader"
	case Set:
		return "set"
	case Unobserve:
		return "unobserve"
	case Ask:
		return "ask"
	}
	return fmt.Sprintf("Type(%d)", int(t))
}

// Mode is how a name is held.
type Mode string

const (
	Exclusive Mode = "exclusive"
	Shared    Mode = "shared"
)

// Event is one thing one client did or saw about one name (a multi-name
// LOCK is one event per name, at one instant).
type Event struct {
	At     time.Duration // since the history began, on the monotonic clock
	Client int
	Type   Type
	Kind   string // what the client does: exclusive, shared, semaphore, fair, multi, cohort
	Name   string
	Mode   Mode   // OK only; "" is Exclusive
	Limit  int    // OK only: the semaphore's K; 0 or 1 is a lock
	Slot   int    // OK of a semaphore: its slot, 1..Limit
	Fence  int64  // OK, Lost, Release: which hold; Leader: which term (0: none)
	Value  string // OK: the value= of a campaign; Set: the new one; Leader: the value pushed
	Agent  string // OK: the agent the client asked; Leader: the agent pushed
	Detail string
}

func (e Event) String() string {
	s := fmt.Sprintf("%v client %d %v %s %s fence=%d mode=%s limit=%d slot=%d", e.At.Round(time.Microsecond),
		e.Client, e.Type, e.Kind, e.Name, e.Fence, e.Mode, e.Limit, e.Slot)
	if e.Value != "" || e.Agent != "" {
		s += fmt.Sprintf(" value=%s agent=%s", e.Value, e.Agent)
	}
	return s + " " + e.Detail
}

// History is a log of events, safe for concurrent use. Its clock is the
// machine's monotonic clock (Stamp), read when an event is recorded: record
// a receipt (OK, Lost) right after reading it, an invocation (Invoke,
// Release) right before sending it. Another process on the machine (a
// client the test kills with kill -9) stamps its events with Stamp itself
// and the test records them with AddStamped.
type History struct {
	start  time.Duration
	mu     sync.Mutex
	events []Event
}

// New starts an empty history; its clock starts now.
func New() *History { return &History{start: Stamp()} }

// Stamp reads the machine's monotonic clock (CLOCK_MONOTONIC), which every
// process on the machine shares, unlike Go's monotonic readings, which
// count from each process's start.
func Stamp() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err) // CLOCK_MONOTONIC exists on every system we run on
	}
	return time.Duration(ts.Nano())
}

// Add records e at the present instant (e.At is overwritten).
func (h *History) Add(e Event) { h.AddStamped(e, Stamp()) }

// AddStamped records e at the instant stamp, read by Stamp in this process
// or another (e.At is overwritten). Events stay in order of their At.
func (h *History) AddStamped(e Event, stamp time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e.At = stamp - h.start
	i := len(h.events)
	for i > 0 && h.events[i-1].At > e.At {
		i--
	}
	h.events = slices.Insert(h.events, i, e)
}

// Events returns a copy of the events so far, in the order recorded
// (which is the order of At).
func (h *History) Events() []Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Event(nil), h.events...)
}

// Len is the number of events so far.
func (h *History) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.events)
}
