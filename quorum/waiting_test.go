package quorum

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/redistest"
)

// TestWaitingRecordsOfTwoAgents: each agent's record shows with its count;
// a new count replaces the old; a count of 0 removes it; a record the
// watchdog's batch renews outlives its heartbeat, one not renewed lapses;
// and once every record is gone, no key is left.
func TestWaitingRecordsOfTwoAgents(t *testing.T) {
	servers := redistest.Start(t, 3)
	cfgA, cfgB := testConfig(t, servers, time.Second, true), testConfig(t, servers, time.Second, false)
	cfgA.InstanceID, cfgB.InstanceID = "host-a/1", "host-b/2"
	a, b := startCluster(t, cfgA), startCluster(t, cfgB)
	ctx := context.Background()
	const heartbeat = 300 * time.Millisecond
	read := func() string {
		t.Helper()
		ws, err := a.WaitingFor(ctx, "n")
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, w := range ws {
			out = append(out, w.Agent+"="+strings.Repeat("x", w.Count))
		}
		slices.Sort(out)
		return strings.Join(out, " ")
	}
	if got := read(); got != "" {
		t.Fatalf("records before any: %q", got)
	}
	if n := a.SetWaiting(ctx, "n", 2, 1000, heartbeat); n < 2 {
		t.Fatalf("the write reached %d masters, want a majority at least", n)
	}
	b.SetWaiting(ctx, "n", 1, 2000, heartbeat)
	if got := read(); got != "host-a=xx host-b=x" {
		t.Fatalf("two agents' records: %q", got)
	}
	a.SetWaiting(ctx, "n", 3, 1000, heartbeat)
	b.SetWaiting(ctx, "n", 0, 0, heartbeat)
	if got := read(); got != "host-a=xxx" {
		t.Fatalf("after a's new count and b's removal: %q", got)
	}
	// a's record is renewed in the watchdog's batch past its heartbeat.
	b.SetWaiting(ctx, "n", 1, 2000, heartbeat)
	for end := time.Now().Add(3 * heartbeat); time.Now().Before(end); time.Sleep(heartbeat / 3) {
		if res := a.Renew(ctx, heartbeat, []RenewKey{a.WaitingKey("n")}); res[0].OK != 3 {
			t.Fatalf("renewal of a's record: %+v", res[0])
		}
	}
	if got := read(); got != "host-a=xxx" {
		t.Fatalf("after 3 heartbeats, a renewed and b not: %q", got)
	}
	if res := b.Renew(ctx, heartbeat, []RenewKey{b.WaitingKey("n")}); res[0].Gone != 3 {
		t.Fatalf("renewal of b's lapsed record: %+v, want gone on every master", res[0])
	}
	a.SetWaiting(ctx, "n", 0, 0, heartbeat)
	awaitKeys(t, servers, "t:{n}:w*") // the removal lands on the last master in the background
}

// TestWaitingRecordsShowOnAMajority: a record shows when a majority of the
// masters has it, with the count a majority has at least and the earliest
// since.
func TestWaitingRecordsShowOnAMajority(t *testing.T) {
	rec := func(count int, since int64) Waiting {
		return Waiting{Instance: "a/1", Agent: "a", Count: count, SinceMilli: since}
	}
	for _, tc := range []struct {
		name string
		seen []Waiting
		want []Waiting
	}{
		{"on every master", []Waiting{rec(2, 5), rec(2, 5), rec(2, 5)}, []Waiting{rec(2, 5)}},
		{"on two of three", []Waiting{rec(2, 5), rec(2, 5)}, []Waiting{rec(2, 5)}},
		{"on one master only: not shown", []Waiting{rec(2, 5)}, nil},
		{"counts that differ: what a majority has at least", []Waiting{rec(3, 7), rec(1, 5), rec(2, 6)}, []Waiting{rec(2, 5)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := mergeWaiting(map[string][]Waiting{"a/1": tc.seen}, 2)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	if w, ok := parseWaiting("host/with/slash/ab12", "4 1700000000000"); !ok || w != (Waiting{Instance: "host/with/slash/ab12", Agent: "host/with/slash", Count: 4, SinceMilli: 1700000000000}) {
		t.Fatalf("parseWaiting: %+v %v", w, ok)
	}
	if _, ok := parseWaiting("a/1", "four 17"); ok {
		t.Fatal("parseWaiting read a count that is not a number")
	}
}
