package history_test

import (
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/history"
)

// A tiny language for histories: times in ms, one event per call.
func at(ms int, client int, typ history.Type, name string, fence int64) history.Event {
	return history.Event{At: time.Duration(ms) * time.Millisecond, Client: client, Type: typ, Name: name, Fence: fence}
}

func invoke(ms, client int, name string) history.Event {
	return at(ms, client, history.Invoke, name, 0)
}

func ok(ms, client int, name string, fence int64) history.Event {
	return at(ms, client, history.OK, name, fence)
}

func shared(e history.Event) history.Event { e.Mode = history.Shared; return e }

func sem(limit, slot int, e history.Event) history.Event { e.Limit, e.Slot = limit, slot; return e }

func release(ms, client int, name string, fence int64) history.Event {
	return at(ms, client, history.Release, name, fence)
}

func lost(ms, client int, name string, fence int64) history.Event {
	return at(ms, client, history.Lost, name, fence)
}

// TestCheck: a history that keeps every rule passes; each broken one fails
// with the rule it breaks, and only that rule.
func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name   string
		events []history.Event
		broken string // the rules that must fail, and no other; "" for none
	}{
		{"exclusive holds one after another pass", []history.Event{
			invoke(0, 1, "x"), ok(1, 1, "x", 10), invoke(2, 2, "x"), release(5, 1, "x", 10), ok(6, 2, "x", 11), lost(9, 2, "x", 11),
		}, ""},
		{"a grant read at the instant of the release's sending is no overlap", []history.Event{
			ok(1, 1, "x", 10), release(5, 1, "x", 10), ok(5, 2, "x", 11), release(6, 2, "x", 11),
		}, ""},
		{"a grant before the holder sent its UNLOCK is an overlap", []history.Event{
			ok(1, 1, "x", 10), ok(4, 2, "x", 11), release(5, 1, "x", 10), release(6, 2, "x", 11),
		}, "overlap"},
		{"a grant before the holder read its LOST is an overlap", []history.Event{
			ok(1, 1, "x", 10), ok(4, 2, "x", 11), lost(5, 1, "x", 10), release(6, 2, "x", 11),
		}, "overlap"},
		{"a hold never released lasts to the end of the history", []history.Event{
			ok(1, 1, "x", 10), ok(40, 2, "x", 11), release(50, 2, "x", 11),
		}, "overlap"},
		{"a release of another fence does not end the hold", []history.Event{
			ok(1, 1, "x", 10), release(2, 1, "x", 9), ok(4, 2, "x", 11), release(5, 1, "x", 10), release(6, 2, "x", 11),
		}, "overlap"},
		{"holds of different names may overlap", []history.Event{
			ok(1, 1, "x", 10), ok(2, 2, "y", 3), release(5, 1, "x", 10), release(6, 2, "y", 3),
		}, ""},
		{"readers overlap, with tied or falling fences", []history.Event{
			shared(ok(1, 1, "rw", 10)), shared(ok(2, 2, "rw", 10)), shared(ok(3, 3, "rw", 9)),
			release(4, 1, "rw", 10), release(5, 2, "rw", 10), release(6, 3, "rw", 9),
			ok(7, 4, "rw", 11), release(8, 4, "rw", 11),
		}, ""},
		{"a writer overlapping a reader is an overlap", []history.Event{
			shared(ok(1, 1, "rw", 10)), ok(2, 2, "rw", 11), release(4, 1, "rw", 10), release(5, 2, "rw", 11),
		}, "overlap"},
		{"a writer's fence not above an earlier reader's", []history.Event{
			shared(ok(1, 1, "rw", 10)), release(2, 1, "rw", 10), ok(3, 2, "rw", 10), release(4, 2, "rw", 10),
		}, "fence"},
		{"a reader's fence not above an earlier writer's", []history.Event{
			ok(1, 1, "rw", 10), release(2, 1, "rw", 10), shared(ok(3, 2, "rw", 9)), release(4, 2, "rw", 9),
		}, "fence"},
		{"an exclusive fence that falls", []history.Event{
			ok(1, 1, "x", 10), release(2, 1, "x", 10), ok(3, 2, "x", 9), release(4, 2, "x", 9),
		}, "fence"},
		{"an exclusive fence that repeats (two cohort hand-overs with one fence)", []history.Event{
			ok(1, 1, "x", 10), release(2, 1, "x", 10), ok(3, 2, "x", 10), release(4, 2, "x", 10),
		}, "fence"},
		{"a semaphore's slots overlap, fences per slot", []history.Event{
			sem(2, 1, ok(1, 1, "s", 10)), sem(2, 2, ok(2, 2, "s", 5)), release(3, 1, "s", 10),
			sem(2, 1, ok(4, 3, "s", 11)), release(5, 2, "s", 5), release(6, 3, "s", 11),
		}, ""},
		{"a semaphore over its limit", []history.Event{
			sem(2, 1, ok(1, 1, "s", 10)), sem(2, 2, ok(2, 2, "s", 11)), sem(2, 2, ok(3, 3, "s", 12)),
			release(4, 1, "s", 10), release(5, 2, "s", 11), release(6, 3, "s", 12),
		}, "limit overlap"}, // three in two slots: two share one
		{"a slot out of range", []history.Event{
			sem(2, 3, ok(1, 1, "s", 10)), release(4, 1, "s", 10),
		}, "limit"},
		{"a fence that falls on one slot", []history.Event{
			sem(2, 1, ok(1, 1, "s", 10)), release(2, 1, "s", 10), sem(2, 1, ok(3, 2, "s", 9)), release(4, 2, "s", 9),
		}, "fence"},
		{"no grant for longer than the window", []history.Event{
			invoke(0, 1, "x"), ok(1, 1, "x", 10), release(2, 1, "x", 10),
			invoke(3, 1, "x"), at(1003, 1, history.Fail, "x", 0), invoke(1004, 1, "x"), ok(1005, 1, "x", 11), release(1006, 1, "x", 11),
		}, "progress"},
		{"one name wedged while another makes progress", []history.Event{
			invoke(0, 1, "x"), invoke(0, 2, "y"), ok(1, 2, "y", 1), release(2, 2, "y", 1),
			invoke(600, 2, "y"), ok(601, 2, "y", 2), release(602, 2, "y", 2), invoke(1200, 1, "x"),
			invoke(1201, 2, "y"), ok(1202, 2, "y", 3), release(1203, 2, "y", 3),
		}, "progress"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := history.Check(tc.events, time.Second)
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

// TestHistoryRecordsInOrder: events recorded from many goroutines come
// back in the order of their stamps.
func TestHistoryRecordsInOrder(t *testing.T) {
	h := history.New()
	var wg sync.WaitGroup
	for c := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				h.Add(history.Event{Client: c, Type: history.Invoke, Name: "x"})
			}
		}()
	}
	wg.Wait()
	events := h.Events()
	if len(events) != 800 || h.Len() != 800 {
		t.Fatalf("%d events", len(events))
	}
	for i := 1; i < len(events); i++ {
		if events[i].At < events[i-1].At {
			t.Fatalf("event %d at %v after %v", i, events[i].At, events[i-1].At)
		}
	}
}

// TestAddStampedKeepsOrder: an event stamped earlier (by another process)
// and recorded late takes its place by its stamp.
func TestAddStampedKeepsOrder(t *testing.T) {
	h := history.New()
	early := history.Stamp()
	h.Add(history.Event{Client: 1, Type: history.Invoke, Name: "x"})
	h.AddStamped(history.Event{Client: 2, Type: history.OK, Name: "x"}, early)
	events := h.Events()
	if len(events) != 2 || events[0].Client != 2 || events[1].Client != 1 || events[0].At > events[1].At {
		t.Fatalf("events out of their stamps' order: %v", events)
	}
}
