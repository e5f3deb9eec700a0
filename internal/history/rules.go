package history

import (
	"fmt"
	"slices"
	"time"
)

// conflict says why two holds of one name may not overlap, or "".
func conflict(x, y Hold) string {
	switch {
	case x.Limit != y.Limit:
		return fmt.Sprintf("held with limit=%d and limit=%d at once", x.Limit, y.Limit)
	case x.Limit > 1 && x.Slot == y.Slot:
		return fmt.Sprintf("two holds of slot %d at once", x.Slot)
	case x.Limit == 1 && (x.Mode == Exclusive || y.Mode == Exclusive):
		return "an exclusive hold overlaps another hold"
	}
	return ""
}

// Overlaps: no exclusive hold overlaps another hold of its name (shared
// holds overlap only each other), no two holds of a semaphore's slot
// overlap, and no name is held with two limits at once. holds must be in
// order of start.
func Overlaps(holds []Hold) []Violation {
	var out []Violation
	named := byName(holds)
	for _, name := range sortedNames(named) {
		var active []Hold // holds of name not ended when the next one starts
		for _, y := range named[name] {
			active = slices.DeleteFunc(active, func(x Hold) bool { return x.End <= y.Start })
			for _, x := range active {
				if why := conflict(x, y); why != "" && overlaps(x, y) {
					out = append(out, Violation{"overlap", fmt.Sprintf("%s: %s and %s", why, x, y)})
				}
			}
			active = append(active, y)
		}
	}
	return out
}

// Counts: a semaphore never has more than its limit of holds at once, and
// every slot is in 1..limit. holds must be in order of start.
func Counts(holds []Hold) []Violation {
	var out []Violation
	named := byName(holds)
	for _, name := range sortedNames(named) {
		var active []Hold
		for _, y := range named[name] {
			if y.Limit == 1 {
				continue
			}
			if y.Slot < 1 || y.Slot > y.Limit {
				out = append(out, Violation{"limit", fmt.Sprintf("slot %d out of 1..%d: %s", y.Slot, y.Limit, y)})
			}
			active = slices.DeleteFunc(active, func(x Hold) bool { return x.End <= y.Start })
			active = append(active, y)
			if len(active) > y.Limit {
				out = append(out, Violation{"limit", fmt.Sprintf("%d holds of %s at once (limit %d) when %s began: %v",
					len(active), name, y.Limit, y, active)})
			}
		}
	}
	return out
}

// Fences: fences grow strictly in grant order wherever holds may not
// overlap. Per name for locks: an exclusive hold's fence is above every
// earlier hold's, a shared hold's above every earlier exclusive hold's
// (readers among themselves may tie, in any order). Per slot for
// semaphores. "Earlier" is by start: holds that may not overlap and do not
// (Overlaps checks that) have one order, their grants'. holds must be in
// order of start.
func Fences(holds []Hold) []Violation {
	var out []Violation
	named := byName(holds)
	for _, name := range sortedNames(named) {
		var lastAll, lastExclusive *Hold // the earlier holds with the highest fence
		lastOfSlot := map[int]*Hold{}
		for _, y := range named[name] {
			var above []*Hold
			switch {
			case y.Limit > 1:
				above = []*Hold{lastOfSlot[y.Slot]}
			case y.Mode == Exclusive:
				above = []*Hold{lastAll}
			default:
				above = []*Hold{lastExclusive}
			}
			for _, x := range above {
				if x != nil && y.Fence <= x.Fence {
					out = append(out, Violation{"fence", fmt.Sprintf("fence %d granted after %d: %s after %s", y.Fence, x.Fence, y, *x)})
				}
			}
			raise := func(p **Hold) {
				if *p == nil || y.Fence > (*p).Fence {
					*p = &y
				}
			}
			if y.Limit > 1 {
				slot := lastOfSlot[y.Slot]
				raise(&slot)
				lastOfSlot[y.Slot] = slot
				continue
			}
			raise(&lastAll)
			if y.Mode == Exclusive {
				raise(&lastExclusive)
			}
		}
	}
	return out
}

// Progress: the service grants something in every window, and each name
// that clients keep asking for is granted in every window while they ask
// (from its first LOCK to its last). A name that no grant reaches for a
// window is wedged.
func Progress(events []Event, window time.Duration) []Violation {
	if len(events) == 0 {
		return nil
	}
	type span struct {
		first, last time.Duration
		grants      []time.Duration
		asked       bool
	}
	all := &span{first: events[0].At, last: events[len(events)-1].At, asked: true}
	names := map[string]*span{}
	for _, e := range events {
		s := names[e.Name]
		if s == nil {
			s = &span{first: e.At}
			names[e.Name] = s
		}
		switch e.Type {
		case Invoke:
			s.last, s.asked = e.At, true
		case OK:
			s.grants = append(s.grants, e.At)
			all.grants = append(all.grants, e.At)
		}
	}
	var out []Violation
	check := func(what string, s *span) {
		prev := s.first
		for _, at := range append(s.grants, s.last) {
			if at-prev > window {
				out = append(out, Violation{"progress", fmt.Sprintf("%s: no grant from %v to %v (%v > %v)",
					what, prev.Round(time.Millisecond), at.Round(time.Millisecond), (at - prev).Round(time.Millisecond), window)})
			}
			prev = max(prev, at)
		}
	}
	check("the service", all)
	for _, name := range sortedNames(names) {
		if names[name].asked {
			check(name, names[name])
		}
	}
	return out
}
