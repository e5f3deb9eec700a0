package history

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Hold is the span in which a client may believe it holds a name: from the
// receipt of its OK to the sending of its UNLOCK or the receipt of its
// LOST, whichever came first, or to the end of the history if neither did.
//
// Those ends are the ones the service must protect, no more and no less:
//   - Not from the LOCK's invocation: a waiting client does not believe it
//     holds, and counting the wait would make every waiter overlap the
//     holder it waits for.
//   - To the UNLOCK's sending, not its reply: the agent may give the name
//     back as soon as it reads the UNLOCK, so another client may rightly be
//     granted it before the releaser reads the OK.
//   - To the LOST's receipt, not its sending: until it reads the LOST the
//     client goes on acting as the holder, and the service promises that
//     LOST before anyone else is granted the name.
//
// Events are stamped a moment after a line is read: that moves an OK later
// (the span shrinks: the checker errs toward passing by the reading delay)
// and a LOST later (it grows: toward failing by that delay). Tests keep the
// reading path short so that neither matters beside a lease.
type Hold struct {
	Client     int
	Kind       string
	Name       string
	Mode       Mode
	Limit      int // 1 for a lock
	Slot       int
	Fence      int64
	Value      string // the value= it was granted with (a campaign's)
	Agent      string // the agent it was granted by, when recorded
	Start, End time.Duration
	Open       bool // neither released nor lost in the history
}

func (h Hold) String() string {
	s := fmt.Sprintf("client %d %s %s fence=%d [%v, %v]", h.Client, h.Kind, h.Name, h.Fence,
		h.Start.Round(time.Microsecond), h.End.Round(time.Microsecond))
	if h.Mode == Shared {
		s += " shared"
	}
	if h.Limit > 1 {
		s += fmt.Sprintf(" limit=%d slot=%d", h.Limit, h.Slot)
	}
	return s
}

func overlaps(x, y Hold) bool { return x.Start < y.End && y.Start < x.End }

// Holds turns events into holds, in order of their start.
func Holds(events []Event) []Hold {
	type key struct {
		client int
		name   string
		fence  int64
	}
	var holds []Hold
	open := map[key]int{}
	var end time.Duration
	for _, e := range events {
		end = max(end, e.At)
		k := key{e.Client, e.Name, e.Fence}
		switch e.Type {
		case OK:
			open[k] = len(holds)
			holds = append(holds, Hold{Client: e.Client, Kind: e.Kind, Name: e.Name, Mode: cmp.Or(e.Mode, Exclusive),
				Limit: max(e.Limit, 1), Slot: e.Slot, Fence: e.Fence, Value: e.Value, Agent: e.Agent, Start: e.At, Open: true})
		case Lost, Release:
			if i, ok := open[k]; ok {
				holds[i].End, holds[i].Open = e.At, false
				delete(open, k)
			}
		}
	}
	for _, i := range open {
		holds[i].End = end
	}
	slices.SortStableFunc(holds, func(x, y Hold) int { return cmp.Compare(x.Start, y.Start) })
	return holds
}

// Violation is one broken rule, with the holds (or the span) that break it.
type Violation struct {
	Rule string // overlap, limit, fence, progress
	Msg  string
}

func (v Violation) String() string { return v.Rule + ": " + v.Msg }

// Report is what Check found.
type Report struct {
	Events, Holds, Lost int
	Violations          []Violation
}

// Err is nil when no rule was broken; otherwise it lists the violations
// (the first few of each rule).
func (r Report) Err() error {
	if len(r.Violations) == 0 {
		return nil
	}
	msgs := make([]string, len(r.Violations))
	for i, v := range r.Violations {
		msgs[i] = v.String()
	}
	return fmt.Errorf("history of %d events, %d holds: %d violations:\n%s",
		r.Events, r.Holds, len(r.Violations), strings.Join(msgs, "\n"))
}

// Rules broken beyond this many times are reported this many times.
const maxPerRule = 10

// Check checks every rule over a history: see Overlaps, Counts, Fences and
// Progress. window is the longest span the service may go without a grant.
func Check(events []Event, window time.Duration) Report {
	holds := Holds(events)
	r := Report{Events: len(events), Holds: len(holds)}
	for _, e := range events {
		if e.Type == Lost {
			r.Lost++
		}
	}
	r.Violations = append(CheckHolds(holds), capped(Progress(events, window))...)
	return r
}

// CheckHolds checks the safety rules (Overlaps, Counts, Fences) over holds
// in order of their start, for a test that records holds itself.
func CheckHolds(holds []Hold) []Violation {
	return slices.Concat(capped(Overlaps(holds)), capped(Counts(holds)), capped(Fences(holds)))
}

func capped(broken []Violation) []Violation { return broken[:min(len(broken), maxPerRule)] }

// byName groups holds (kept in order of start) by name.
func byName(holds []Hold) map[string][]Hold {
	out := map[string][]Hold{}
	for _, h := range holds {
		out[h.Name] = append(out[h.Name], h)
	}
	return out
}

func sortedNames[V any](m map[string]V) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
