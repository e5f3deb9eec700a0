package quorum

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

func entryReq(name, holder string, claim Claim, e *Entry) AcquireRequest {
	r := claimReq(name, holder, claim)
	r.Entry = e
	return r
}

// TestQueueOrdersClaims: a claim may not pass a conflicting entry ahead of
// its own, and one without an entry may pass none; adjacent readers go
// together; an entry that leaves lets the next one through.
func TestQueueOrdersClaims(t *testing.T) {
	servers := redistest.Start(t, 3)
	c := newCluster(t, servers, time.Second)
	ctx := context.Background()
	if _, err := acquire(ctx, c, claimReq("q", "holder", Claim{})); err != nil {
		t.Fatal(err)
	}
	first, second := &Entry{ID: "a:1", Claim: Claim{}}, &Entry{ID: "b:1", Claim: Claim{}}
	t1, err := c.Enqueue(ctx, "q", []Entry{*first}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t2, err := c.Enqueue(ctx, "q", []Entry{*second}, 5*time.Second)
	if err != nil || t2[0] <= t1[0] {
		t.Fatalf("second ticket %v (%v), want > %v", t2, err, t1)
	}
	// Enqueue returns once a majority holds the settled ticket; the last
	// master may take it a moment later, and none ever holds another.
	settled := 0
	for i, s := range servers {
		switch got, _ := s.Do("ZSCORE", "t:{q}:q", second.Member()); got {
		case fmt.Sprint(t2[0]):
			settled++
		case "":
		default:
			t.Fatalf("m%d holds ticket %q for the second entry, want the settled %d or none yet", i, got, t2[0])
		}
	}
	if settled < 2 {
		t.Fatalf("%d masters hold the settled ticket when Enqueue returned, want a majority", settled)
	}
	awaitScore(t, servers, "t:{q}:q", second.Member(), fmt.Sprint(t2[0]))
	if n, err := c.QueueLen(ctx, "q"); err != nil || n != 2 {
		t.Fatalf("queue length %d %v, want 2", n, err)
	}
	c.Release(ctx, "q", "holder")

	if _, err := acquire(ctx, c, entryReq("q", "h2", Claim{}, second)); !errors.Is(err, ErrBusy) {
		t.Fatalf("the second entry passed the first: %v", err)
	}
	if _, err := acquire(ctx, c, claimReq("q", "plain", Claim{Mode: Shared})); !errors.Is(err, ErrBusy) {
		t.Fatalf("a reader with no entry passed queued writers: %v", err)
	}
	if _, err := acquire(ctx, c, entryReq("q", "h1", Claim{}, first)); err != nil {
		t.Fatalf("the first entry: %v", err)
	}
	c.Dequeue(ctx, "q", []Entry{*first})
	c.Release(ctx, "q", "h1")
	awaitKeys(t, servers, "t:{q}:h:h1")
	awaitTombstones(t, servers, "t:{q}:qx:"+first.Member())
	if _, err := acquire(ctx, c, entryReq("q", "h2b", Claim{}, second)); err != nil {
		t.Fatalf("the second entry once the first left: %v", err)
	}
	c.Dequeue(ctx, "q", []Entry{*second})
	c.Release(ctx, "q", "h2b")
	awaitKeys(t, servers, "t:{q}:q")  // the queue emptied: its keys go
	awaitKeys(t, servers, "t:{q}:qd") // with it

	// Readers queued behind a writer go together once it leaves; a writer
	// behind them waits.
	if _, err := acquire(ctx, c, claimReq("rw", "w", Claim{})); err != nil {
		t.Fatal(err)
	}
	readers := []Entry{{ID: "r:1", Claim: Claim{Mode: Shared}}, {ID: "r:2", Claim: Claim{Mode: Shared}}}
	writer := Entry{ID: "w:2", Claim: Claim{}}
	if _, err := c.Enqueue(ctx, "rw", append(readers, writer), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	c.Release(ctx, "rw", "w")
	for i := range readers {
		if _, err := acquire(ctx, c, entryReq("rw", readers[i].ID, readers[i].Claim, &readers[i])); err != nil {
			t.Fatalf("reader %d: %v", i, err)
		}
	}
	if _, round, err := c.Acquire(ctx, entryReq("rw", "w2", Claim{}, &writer)); err != nil || round == nil || !errors.Is(round.Err(), ErrBusy) || !round.OnlyReaders {
		t.Fatalf("the writer behind two readers: %+v %v, want busy on readers only", round, err)
	}
}

// TestQueueEntriesOfADeadAgentLapse: entries whose heartbeat stops leave
// the queue once it lapses; renewed ones stay.
func TestQueueEntriesOfADeadAgentLapse(t *testing.T) {
	servers := redistest.Start(t, 3)
	c := newCluster(t, servers, time.Second)
	ctx := context.Background()
	dead, live := Entry{ID: "dead:1"}, Entry{ID: "live:1"}
	if _, err := c.Enqueue(ctx, "d", []Entry{dead, live}, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		time.Sleep(100 * time.Millisecond)
		r := c.Renew(ctx, time.Second, []RenewKey{{Name: "d", Holder: live.Member(), Entry: true, Lease: 300 * time.Millisecond}})
		if r[0].OK != 3 {
			t.Fatalf("heartbeat renewed on %d masters, want 3", r[0].OK)
		}
	}
	if _, err := acquire(ctx, c, entryReq("d", "h", Claim{}, &live)); err != nil {
		t.Fatalf("the live entry behind a dead one: %v", err)
	}
	if _, err := acquire(ctx, c, entryReq("d2", "h", Claim{}, &live)); err != nil {
		t.Fatalf("an entry on another name's queue: %v", err)
	}
	c.Dequeue(ctx, "d", []Entry{live})
	awaitTombstones(t, servers, "t:{d}:qx:"+live.Member())
	r := c.Renew(ctx, time.Second, []RenewKey{{Name: "d", Holder: live.Member(), Entry: true, Lease: time.Second}})
	if r[0].Gone != 3 {
		t.Fatalf("a dequeued entry's heartbeat: %+v, want gone everywhere", r[0])
	}
	// A settle that arrives after the dequeue does not bring it back.
	if tickets, err := c.Enqueue(ctx, "d", []Entry{live}, time.Second); err != nil || tickets[0] != 0 {
		t.Fatalf("re-enqueue of a dequeued entry: %v %v, want ticket 0", tickets, err)
	}
}

// TestQueueTicketsSettleOverLaggingMasters: masters whose counters differ
// still order the queue alike, and an entry made later goes behind on
// every master, whichever majority it reaches.
func TestQueueTicketsSettleOverLaggingMasters(t *testing.T) {
	servers := redistest.Start(t, 3)
	c := newCluster(t, servers, time.Second)
	ctx := context.Background()
	servers[0].Do("SET", "t:{s}:qseq", "9000000000000000")
	a := Entry{ID: "a"}
	ta, err := c.Enqueue(ctx, "s", []Entry{a}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	awaitScore(t, servers, "t:{s}:q", a.Member(), fmt.Sprint(ta[0])) // the settle goes on past a majority
	servers[0].Pause()
	defer servers[0].Resume()
	b := Entry{ID: "b"}
	tb, err := c.Enqueue(ctx, "s", []Entry{b}, 5*time.Second)
	if err != nil || tb[0] <= ta[0] {
		t.Fatalf("a later entry on the other majority: %v %v, want > %d", tb, err, ta[0])
	}
}

// TestQueueSplitVote: masters whose queues differ (an entry that reached
// only one master, which has not settled) vote each by its own: the claim
// wins on the majority that has nothing ahead of it, and an entry that
// reached no majority blocks nothing there.
func TestQueueSplitVote(t *testing.T) {
	servers := redistest.Start(t, 3)
	c := newCluster(t, servers, time.Second)
	ctx := context.Background()
	lone := Entry{ID: "lone"}
	servers[0].Do("ZADD", "t:{sv}:q", "1", lone.Member())
	servers[0].Do("ZADD", "t:{sv}:qd", "99999999999999", lone.Member())
	g, err := acquire(ctx, c, claimReq("sv", "h", Claim{}))
	if err != nil {
		t.Fatalf("a claim with an entry ahead on one master of three: %v", err)
	}
	c.Release(ctx, "sv", "h")
	awaitKeys(t, servers, "t:{sv}:h:h")
	servers[1].Do("ZADD", "t:{sv}:q", "1", lone.Member())
	servers[1].Do("ZADD", "t:{sv}:qd", "99999999999999", lone.Member())
	// Two refusals decide the round: the third answer may not be read.
	if _, err := acquire(ctx, c, claimReq("sv", "h2", Claim{})); !errors.Is(err, ErrBusy) {
		t.Fatalf("the same entry on two masters: %v, want busy", err)
	}
	if _, err := acquire(ctx, c, entryReq("sv", "h3", Claim{}, &lone)); err != nil || g.Fence == 0 {
		t.Fatalf("the entry itself: %v", err)
	}
}

// mastersWith counts the servers for which has holds.
func mastersWith(servers []*redistest.Server, has func(*redistest.Server) bool) int {
	n := 0
	for _, s := range servers {
		if has(s) {
			n++
		}
	}
	return n
}

// awaitTombstones waits until every server has the key.
func awaitTombstones(t *testing.T, servers []*redistest.Server, key string) {
	t.Helper()
	n := 0
	lockagenttest.Eventually(t, 2*time.Second, func() bool {
		n = mastersWith(servers, func(s *redistest.Server) bool { return s.Keys(key) > 0 })
		return n == len(servers)
	}, "only %d masters have %s", &n, key)
}

// awaitScore waits until every master scores member of key score.
func awaitScore(t *testing.T, servers []*redistest.Server, key, member, score string) {
	t.Helper()
	n := 0
	lockagenttest.Eventually(t, 2*time.Second, func() bool {
		n = mastersWith(servers, func(s *redistest.Server) bool { got, _ := s.Do("ZSCORE", key, member); return got == score })
		return n == len(servers)
	}, "%d of %d masters score %s %s in %s", &n, len(servers), member, score, key)
}

// awaitKeys waits until no server has a key matching pattern: a release or
// dequeue returns once a majority answered, and lands on the rest just after.
func awaitKeys(t *testing.T, servers []*redistest.Server, pattern string) {
	t.Helper()
	n := 0
	lockagenttest.Eventually(t, 2*time.Second, func() bool {
		n = mastersWith(servers, func(s *redistest.Server) bool { return s.Keys(pattern) > 0 })
		return n == 0
	}, "%d masters still have %s", &n, pattern)
}

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
