package history_test

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/history"
)

// The election's little language: candidates 1-9 campaign for "e" on
// agents "a" and "b" with value vN; observers are clients 10 and up.
func elected(ms, client int, fence int64, agent string) history.Event {
	e := ok(ms, client, "e", fence)
	e.Kind, e.Value, e.Agent = "fair", "v"+string(rune('0'+client)), agent
	return e
}

func resign(ms, client int, fence int64) history.Event { return release(ms, client, "e", fence) }

func observe(ms, client int) history.Event { return at(ms, client, history.Observe, "e", 0) }

func unobserve(ms, client int) history.Event { return at(ms, client, history.Unobserve, "e", 0) }

// push is a * LEADER push of the term that candidate leader was elected
// to; leader 0 is "none".
func push(ms, client, leader int, fence int64, agent string) history.Event {
	e := at(ms, client, history.Leader, "e", fence)
	if leader != 0 {
		e.Value, e.Agent = "v"+string(rune('0'+leader)), agent
	}
	return e
}

// terms: candidate 1 (agent a) leads 1-500 ms with fence 3, candidate 2
// (agent b) 500-1500 with fence 4 (elected at its release's instant),
// candidate 3 (agent a) 1600-2600 with fence 6.
func terms() []history.Event {
	return []history.Event{
		invoke(0, 1, "e"), invoke(0, 2, "e"), elected(1, 1, 3, "a"), invoke(2, 3, "e"),
		resign(500, 1, 3), elected(500, 2, 4, "b"), resign(1500, 2, 4), elected(1600, 3, 6, "a"), resign(2600, 3, 6),
	}
}

// seen is an observer's session over terms(): it observes from 0 to 2700
// and reads each push 2 ms after its change.
func seen(client int) []history.Event {
	return []history.Event{
		observe(0, client), push(0, client, 0, 0, ""), push(3, client, 1, 3, "a"), push(502, client, 2, 4, "b"),
		push(1502, client, 0, 0, ""), push(1602, client, 3, 6, "a"), push(2602, client, 0, 0, ""), unobserve(2700, client),
	}
}

// leaderCall is a Leader() call by client: it sends OBSERVE at ms, reads
// the OK 1 ms later, then its one push (answer), and ends.
func leaderCall(ms, client int, answer history.Event) []history.Event {
	return []history.Event{at(ms, client, history.Ask, "e", 0), observe(ms+1, client), answer,
		unobserve(int(answer.At/time.Millisecond)+1, client)}
}

func proclaim(ms, client int, fence int64, value string) history.Event {
	e := at(ms, client, history.Set, "e", fence)
	e.Value = value
	return e
}

func withValue(e history.Event, value string) history.Event { e.Value = value; return e }

func sorted(events ...[]history.Event) []history.Event {
	all := slices.Concat(events...)
	slices.SortStableFunc(all, func(x, y history.Event) int { return int(x.At - y.At) })
	return all
}

// without drops the events for which drop is true.
func without(events []history.Event, drop func(history.Event) bool) []history.Event {
	return slices.DeleteFunc(slices.Clone(events), drop)
}

// TestCheckElection: an election whose observers saw every term in order
// passes; each broken history fails with exactly the rule it breaks.
func TestCheckElection(t *testing.T) {
	good := sorted(terms(), seen(10), seen(11))
	for _, tc := range []struct {
		name   string
		events []history.Event
		broken string
	}{
		{"terms one after another, seen by every observer, pass", good, ""},
		{"an observer that joins mid-term and leaves mid-term sees what it must", sorted(terms(), []history.Event{
			observe(700, 12), push(701, 12, 2, 4, "b"), push(1502, 12, 0, 0, ""), unobserve(1700, 12),
		}), ""},
		{"a new value for the same term is a change", sorted(terms(), []history.Event{
			observe(600, 12), push(601, 12, 2, 4, "b"), proclaim(899, 2, 4, "v2b"), withValue(push(900, 12, 2, 4, "b"), "v2b"), unobserve(1000, 12),
		}), ""},
		{"a value no one set is the wrong value", sorted(terms(), []history.Event{
			observe(600, 12), push(601, 12, 2, 4, "b"), withValue(push(900, 12, 2, 4, "b"), "v2b"), unobserve(1000, 12),
		}), "observer-value"},
		{"a term shorter than mustSee may be skipped", sorted(terms(), []history.Event{
			elected(2650, 4, 7, "b"), resign(2700, 4, 7), elected(2700, 5, 8, "b"), resign(3000, 5, 8),
			observe(2640, 12), push(2641, 12, 0, 0, ""), push(2702, 12, 5, 8, "b"), unobserve(3100, 12),
		}), ""},
		{"two leaders at once", sorted(terms(), seen(10), []history.Event{elected(1000, 4, 5, "a"), resign(1150, 4, 5)}),
			"overlap"}, // too short for observers to have to see it
		{"a term's fence below an earlier term's", sorted(without(terms(), func(e history.Event) bool { return e.Client == 3 && e.Fence == 6 }),
			[]history.Event{elected(1600, 3, 2, "a"), resign(2600, 3, 2)}), "fence"},
		{"an observer sees an older term after a newer one", sorted(terms(), without(seen(12), func(e history.Event) bool {
			return e.Fence == 3
		}), []history.Event{push(600, 12, 1, 3, "a")}), "observer-order observer-subsequence"},
		{"an observer sees a term again after none", sorted(terms(), seen(12), []history.Event{push(1550, 12, 2, 4, "b")}),
			"observer-order"},
		{"an observer is pushed the same term twice with no change", sorted(terms(), seen(12), []history.Event{push(900, 12, 2, 4, "b")}),
			"observer-order"},
		{"an observer is pushed the wrong value", sorted(terms(), without(seen(12), func(e history.Event) bool { return e.Fence == 4 }),
			[]history.Event{push(502, 12, 1, 4, "b")}), "observer-value"},
		{"an observer is pushed the wrong agent", sorted(terms(), without(seen(12), func(e history.Event) bool { return e.Fence == 4 }),
			[]history.Event{push(502, 12, 2, 4, "a")}), "observer-value"},
		{"an observer misses a long term", sorted(terms(), without(seen(12), func(e history.Event) bool { return e.Fence == 4 })),
			"observer-missed"},
		{"a Leader() asked just before the next grant was read may name the term before", sorted(terms(),
			leaderCall(499, 12, push(502, 12, 1, 3, "a"))), ""},
		{"a Leader() asked after the term before ended may name none", sorted(terms(),
			leaderCall(1550, 12, push(1552, 12, 0, 0, ""))), ""},
		{"a Leader() asked after the next grant was read names the term that ended (the old o.last answer)",
			sorted(terms(), leaderCall(600, 12, push(602, 12, 1, 3, "a"))), "observer-stale"},
		{"a Leader() asked while a term was held names none (the old o.last answer mid hand-over)",
			sorted(terms(), leaderCall(600, 12, push(602, 12, 0, 0, ""))), "observer-stale"},
		{"a new observer's first push is held to the same rule", sorted(terms(), []history.Event{
			at(600, 12, history.Ask, "e", 0), observe(601, 12), push(602, 12, 1, 3, "a"), push(603, 12, 2, 4, "b"),
			unobserve(700, 12)}), "observer-stale"},
		{"an observer that left misses nothing after it left", sorted(terms(), without(seen(12), func(e history.Event) bool {
			return e.At > time.Second
		}), []history.Event{unobserve(1000, 12)}), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := history.CheckElection(tc.events, 2*time.Second, 200*time.Millisecond)
			broken := map[string]bool{}
			for _, v := range r.Violations {
				broken[v.Rule] = true
			}
			want := map[string]bool{}
			for _, rule := range strings.Fields(tc.broken) {
				want[rule] = true
			}
			if !maps.Equal(broken, want) {
				t.Fatalf("want violations of %v, got %v: %v", want, broken, r.Err())
			}
			if err := r.Err(); err != nil {
				t.Log(err)
			}
		})
	}
}

// TestObserverLags: each change an observer saw counts once, from the
// grant (or the end of the term before a "none"); a term it found already
// elected when it began does not count.
func TestObserverLags(t *testing.T) {
	events := sorted(terms(), seen(10), []history.Event{
		observe(700, 12), push(701, 12, 2, 4, "b"), push(1510, 12, 0, 0, ""), push(1600, 12, 3, 6, "a"), unobserve(1700, 12),
	})
	var got []time.Duration
	for _, lag := range history.ObserverLags(events) {
		got = append(got, lag/time.Millisecond)
	}
	// observer 10: 2 ms after each of five changes; observer 12: the end of
	// term 4 after 10 ms, term 6 read at its grant's instant.
	if want := []time.Duration{2, 2, 2, 2, 2, 10, 0}; !slices.Equal(got, want) {
		t.Fatalf("lags in ms: got %v, want %v", got, want)
	}
}

// TestPhantoms: a push of a fence no client was granted is a phantom; the
// terms of terms() pushed rightly are not.
func TestPhantoms(t *testing.T) {
	if v := history.Phantoms(sorted(terms(), seen(10))); len(v) != 0 {
		t.Fatalf("phantoms in a good history: %v", v)
	}
	broken := sorted(terms(), without(seen(10), func(e history.Event) bool { return e.Fence == 4 }),
		[]history.Event{push(502, 10, 2, 5, "b")}) // fence 5 for candidate 2, granted 4
	if v := history.Phantoms(broken); len(v) != 1 || v[0].Rule != "observer-phantom" {
		t.Fatalf("want one phantom, got %v", v)
	}
}
