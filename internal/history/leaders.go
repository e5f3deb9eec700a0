package history

import (
	"fmt"
	"slices"
	"time"
)

// An election's history is a lock history whose holds are terms: a
// campaign is an exclusive fair LOCK, a term lasts from its OK to its
// UNLOCK sent, its LOST read or its process killed (recorded as a Release
// when the kill is sent), and its fence is the term. "Exactly one leader
// at any instant" is then Overlaps over the election's name, and "terms
// grow" is Fences. What the election adds is its observers: each
// observing session's pushes must keep the order of the terms, name them
// rightly, and miss none that lasted long enough to be seen.

// Observation is one observer session of one name: from the OK of its
// OBSERVE to its end (Unobserve), or to the end of the history if it did
// not end (Open), with the * LEADER pushes it read, in order. Asked is when
// it sent the OBSERVE (its Ask), or Start if that was not recorded.
type Observation struct {
	Client     int
	Name       string
	Asked      time.Duration
	Start, End time.Duration
	Open       bool
	Pushes     []Event
}

func (o Observation) String() string {
	return fmt.Sprintf("observer %d of %s [%v, %v] (%d pushes)", o.Client, o.Name,
		o.Start.Round(time.Microsecond), o.End.Round(time.Microsecond), len(o.Pushes))
}

// Observations turns events into observer sessions, in order of their
// start. Each session is one client: a client that observes again after
// Unobserve starts a new Observation.
func Observations(events []Event) []Observation {
	type key struct {
		client int
		name   string
	}
	var out []Observation
	open := map[key]int{}
	asked := map[key]time.Duration{}
	var end time.Duration
	for _, e := range events {
		end = max(end, e.At)
		k := key{e.Client, e.Name}
		i, live := open[k]
		switch {
		case e.Type == Ask:
			asked[k] = e.At
		case e.Type == Observe:
			open[k] = len(out)
			at, ok := asked[k]
			if !ok {
				at = e.At
			}
			delete(asked, k)
			out = append(out, Observation{Client: e.Client, Name: e.Name, Asked: at, Start: e.At, Open: true})
		case e.Type == Leader && live:
			out[i].Pushes = append(out[i].Pushes, e)
		case e.Type == Unobserve && live:
			out[i].End, out[i].Open = e.At, false
			delete(open, k)
		}
	}
	for _, i := range open {
		out[i].End = end
	}
	return out
}

// CheckElection checks an election's history: every rule of Check (terms
// never overlap, their fences grow, someone is elected in every window)
// and every rule of Observers.
func CheckElection(events []Event, window, mustSee time.Duration) Report {
	r := Check(events, window)
	r.Violations = append(r.Violations, Observers(events, mustSee)...)
	return r
}

// Observers checks each observer session against the terms (the holds of
// the name it observes):
//   - observer-order: fences pushed never fall; a term is not pushed again
//     after a newer one or after a "none", and nothing is pushed twice
//     without a change (a term again only with a new value, "none" not
//     twice in a row): an observer never sees an older term after a newer.
//   - observer-value: a push that names a term a client was granted names
//     it with the value and agent that client was granted it with.
//   - observer-missed: every term that lasted at least mustSee, while the
//     session observed for at least mustSee of it, is among its pushes.
//   - observer-subsequence: the terms pushed, in the order pushed, are a
//     subsequence of the true sequence of terms (the order their grants
//     were read): an observer may miss terms, never reorder them.
//   - observer-stale: the first push of a session (a Leader() call's
//     answer) names the leader as of its OBSERVE or later: never a term
//     that had ended before the OBSERVE was sent, as the history knows it
//     (a newer term's grant was read before), and never "none" while a
//     term granted before the OBSERVE was held until the push was read.
//
// mustSee is the shortest term every observer must see: a term shorter
// than that may be replaced by the next before an observer hears of it
// (the agent pushes the leader it reads, and a missed message is made up
// by a timer); choose it as the longest an observer may take to hear of a
// change (the fallback timer, a lease), not the usual lag.
func Observers(events []Event, mustSee time.Duration) []Violation {
	terms := termsOf(events)
	values := map[string]map[int64][]string{} // name, fence: every value the term had
	for _, e := range events {
		if e.Type == OK || e.Type == Set {
			if values[e.Name] == nil {
				values[e.Name] = map[int64][]string{}
			}
			values[e.Name][e.Fence] = append(values[e.Name][e.Fence], e.Value)
		}
	}
	granted := map[string][]Hold{} // each name's terms, in the order their grants were read
	for _, h := range Holds(events) {
		granted[h.Name] = append(granted[h.Name], h)
	}
	var order, value, missed, subsequence, stale []Violation
	for _, o := range Observations(events) {
		order = append(order, pushOrder(o)...)
		value = append(value, pushValues(o, terms[o.Name], values[o.Name])...)
		missed = append(missed, missedTerms(o, terms[o.Name], mustSee)...)
		subsequence = append(subsequence, pushSubsequence(o, granted[o.Name])...)
		stale = append(stale, staleFirst(o, granted[o.Name])...)
	}
	return slices.Concat(capped(order), capped(value), capped(missed), capped(subsequence), capped(stale))
}

// pushSubsequence is the rule observer-subsequence over one session:
// granted is the name's terms in the order their grants were read. Pushes
// of "none" and of fences no client read the grant of are left out.
func pushSubsequence(o Observation, granted []Hold) []Violation {
	place := map[int64]int{}
	for i, h := range granted {
		place[h.Fence] = i
	}
	var out []Violation
	last := -1
	for _, p := range o.Pushes {
		i, ok := place[p.Fence]
		if p.Fence == 0 || !ok {
			continue
		}
		if i < last {
			out = append(out, Violation{"observer-subsequence", fmt.Sprintf("%s: %s pushed after %s, granted later",
				o, granted[i], granted[last])})
		}
		last = max(last, i)
	}
	return out
}

// staleFirst is the rule observer-stale over one session: granted is the
// name's terms in the order their grants were read.
func staleFirst(o Observation, granted []Hold) []Violation {
	if len(o.Pushes) == 0 {
		return nil
	}
	first := o.Pushes[0]
	newest := -1 // the last term whose grant was read before the OBSERVE was sent
	for i, h := range granted {
		if h.Start < o.Asked {
			newest = i
		}
	}
	if newest < 0 {
		return nil
	}
	n := granted[newest]
	why := ""
	if first.Fence == 0 && n.End > first.At {
		why = fmt.Sprintf("first pushed none, while %s, granted before the OBSERVE was sent, was held until after", n)
	}
	for _, h := range granted[:newest] {
		if first.Fence != 0 && h.Fence == first.Fence {
			why = fmt.Sprintf("first pushed %s, which %s had followed before the OBSERVE was sent", h, n)
		}
	}
	if why == "" {
		return nil
	}
	return []Violation{{"observer-stale", fmt.Sprintf("%s, asked at %v: %s: %s", o,
		o.Asked.Round(time.Microsecond), why, first)}}
}

// pushOrder is the rule observer-order over one session.
func pushOrder(o Observation) []Violation {
	var out []Violation
	var last *Event           // the last push
	var newest int64          // the highest fence pushed so far
	ended := map[int64]bool{} // terms pushed, then followed by none or a newer term
	for i := range o.Pushes {
		p := &o.Pushes[i]
		why := ""
		switch {
		case p.Fence == 0 && last != nil && last.Fence == 0:
			why = "none pushed twice in a row"
		case p.Fence == 0:
		case p.Fence < newest:
			why = fmt.Sprintf("term %d after the newer term %d", p.Fence, newest)
		case ended[p.Fence]:
			why = fmt.Sprintf("term %d again after it ended (none)", p.Fence)
		case last != nil && last.Fence == p.Fence && last.Value == p.Value && last.Agent == p.Agent:
			why = fmt.Sprintf("term %d pushed twice with no change", p.Fence)
		}
		if why != "" {
			out = append(out, Violation{"observer-order", fmt.Sprintf("%s: %s: %s", o, why, p)})
		}
		if last != nil && last.Fence != 0 && last.Fence != p.Fence {
			ended[last.Fence] = true
		}
		newest, last = max(newest, p.Fence), p
	}
	return out
}

// termsOf is the holds of each name by fence.
func termsOf(events []Event) map[string]map[int64]Hold {
	terms := map[string]map[int64]Hold{}
	for _, h := range Holds(events) {
		if terms[h.Name] == nil {
			terms[h.Name] = map[int64]Hold{}
		}
		terms[h.Name][h.Fence] = h
	}
	return terms
}

// pushValues is the rule observer-value over one session: values holds
// every value each term had (granted or set). A push of a fence no client
// read the grant of (its candidate was killed before it read the OK) is
// not checked.
func pushValues(o Observation, terms map[int64]Hold, values map[int64][]string) []Violation {
	var out []Violation
	for _, p := range o.Pushes {
		t, ok := terms[p.Fence]
		if p.Fence == 0 || !ok {
			continue
		}
		if !slices.Contains(values[p.Fence], p.Value) || (t.Agent != "" && p.Agent != t.Agent) {
			out = append(out, Violation{"observer-value", fmt.Sprintf("%s: pushed value=%s agent=%s for %s (values %v, agent=%s)",
				o, p.Value, p.Agent, t, values[p.Fence], t.Agent)})
		}
	}
	return out
}

// missedTerms is the rule observer-missed over one session.
func missedTerms(o Observation, terms map[int64]Hold, mustSee time.Duration) []Violation {
	seen := map[int64]bool{}
	for _, p := range o.Pushes {
		seen[p.Fence] = true
	}
	var out []Violation
	for _, f := range sortedFences(terms) {
		t := terms[f]
		watched := min(t.End, o.End) - max(t.Start, o.Start)
		if t.End-t.Start >= mustSee && watched >= mustSee && !seen[f] {
			out = append(out, Violation{"observer-missed", fmt.Sprintf("%s never saw %s, watched for %v of it",
				o, t, watched.Round(time.Millisecond))})
		}
	}
	return out
}

func sortedFences(terms map[int64]Hold) []int64 {
	out := make([]int64, 0, len(terms))
	for f := range terms {
		out = append(out, f)
	}
	slices.Sort(out)
	return out
}

// ObserverLags is how long after each change its observers heard of it:
// for each session, the first push of each term that began while the
// session observed, from the term's grant (its candidate reading the OK)
// to the push's reading, and each "none" from the end of the term pushed
// before it. A push read before its candidate read the OK counts as 0.
// Pushes of terms no client read the grant of are left out.
func ObserverLags(events []Event) []time.Duration {
	terms := termsOf(events)
	var lags []time.Duration
	for _, o := range Observations(events) {
		var last int64
		for _, p := range o.Pushes {
			if p.Fence == last {
				continue
			}
			changed, ok := terms[o.Name][p.Fence]
			if p.Fence == 0 {
				prev, known := terms[o.Name][last]
				changed, ok = Hold{Start: prev.End}, known && !prev.Open
			}
			if ok && changed.Start > o.Start {
				lags = append(lags, max(p.At-changed.Start, 0))
			}
			last = p.Fence
		}
	}
	return lags
}

// Phantoms is the rule observer-phantom, for a run in which every grant is
// read by its client (no candidate is killed while it waits, no agent is
// killed): every term an observer is pushed is one a client was granted,
// so a push of any other fence names a leader that never was (a fence
// read from a master before the grant's fence was settled, say).
func Phantoms(events []Event) []Violation {
	terms := termsOf(events)
	var out []Violation
	for _, o := range Observations(events) {
		for _, p := range o.Pushes {
			if _, ok := terms[o.Name][p.Fence]; p.Fence != 0 && !ok {
				out = append(out, Violation{"observer-phantom", fmt.Sprintf("%s: pushed a term no client was granted: %s", o, p)})
			}
		}
	}
	return capped(out)
}
