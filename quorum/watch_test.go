package quorum

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

func TestLeaderOf(t *testing.T) {
	h := func(id string, fence int64) Holder { return Holder{ID: id, Record: Record{Fence: fence}} }
	tests := []struct {
		name    string
		holders []Holder
		want    string // "" for none
	}{
		{"no holder is no leader", nil, ""},
		{"a lock's one holder leads", []Holder{h("a", 7)}, "a"},
		{"of shared holders the one with the lowest fence leads", []Holder{h("b", 9), h("a", 7), h("c", 8)}, "a"},
		{"a newer holder does not take over from an older one", []Holder{h("a", 7), h("z", 100)}, "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := LeaderOf(tt.holders)
			if ok != (tt.want != "") || got.ID != tt.want {
				t.Fatalf("LeaderOf = %q, %v; want %q", got.ID, ok, tt.want)
			}
		})
	}
}

// TestValueSetCheckAndLeaderOnRealMasters: a grant's value is in WHO, SET
// replaces it on every master, CHECK holds for the grant's fence only, a
// grant of an observed name signals the watch's Leader (and not C), and
// Leader reads the holder.
func TestValueSetCheckAndLeaderOnRealMasters(t *testing.T) {
	ctx := context.Background()
	servers := redistest.Start(t, 3)
	c := newCluster(t, servers, time.Second)
	w := c.Watch(ctx, "v")
	defer w.Close()
	<-w.Recheck() // subscribed on a master at least
	drain := func(ch <-chan struct{}) {
		select {
		case <-ch:
		default:
		}
	}
	if got := c.MarkObserved(ctx, "v", 5*time.Second); got != 3 {
		t.Fatalf("marked on %d masters", got)
	}
	awaitSubscribed(t, c, servers, "v") // a later message is not lost
	drain(w.Leader())
	drain(w.C())
	r := req("v", "h1")
	r.Who.Value = "one"
	g, err := acquire(ctx, c, r)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.Leader():
	case <-time.After(5 * time.Second):
		t.Fatal("a grant of an observed name did not signal Leader")
	}
	select {
	case <-w.C():
		t.Fatal("a grant woke the waiters")
	default:
	}
	leader, ok, err := c.Leader(ctx, "v", false)
	if err != nil || !ok || leader.ID != "h1" || leader.Record.Who.Value != "one" || leader.Record.Fence != g.Fence {
		t.Fatalf("Leader = %+v, %v, %v", leader, ok, err)
	}
	// The grant returned once a majority had it; a SET before it reaches
	// the last master finds no holder there, and the late grant then
	// leaves "one" on it.
	awaitOnEveryMaster(t, servers, c.keys.Holder("v", "h1"))
	if err := c.SetValue(ctx, "v", "h1", "two"); err != nil {
		t.Fatal(err)
	}
	for i, s := range servers { // SET returns once a majority has it: the last may get it just after
		var v string
		lockagenttest.Eventually(t, 2*time.Second, func() bool { v, _ = s.Do("HGET", c.keys.Holder("v", "h1"), "value"); return v == "two" },
			"master %d: value %q", i, &v)
	}
	if err := c.SetValue(ctx, "v", "nobody", "x"); err == nil {
		t.Fatal("SET of a holder no master has succeeded")
	}
	for fence, want := range map[int64]bool{g.Fence: true, g.Fence - 1: false, g.Fence + 1: false} {
		if current, err := c.Check(ctx, "v", fence); err != nil || current != want {
			t.Fatalf("Check(%d) = %v, %v; want %v", fence, current, err, want)
		}
	}
	if _, err := c.Release(ctx, "v", "h1"); err != nil {
		t.Fatal(err)
	}
	if current, err := c.Check(ctx, "v", g.Fence); err != nil || current {
		t.Fatalf("Check after release = %v, %v", current, err)
	}
	if _, ok, err := c.Leader(ctx, "v", false); ok || err != nil {
		t.Fatalf("a leader after release: %v, %v", ok, err)
	}
}

// subscriber is a raw SUBSCRIBE connection to one master.
type subscriber struct {
	t *testing.T
	r *bufio.Reader
}

func subscribe(t *testing.T, s *redistest.Server, channel string) *subscriber {
	t.Helper()
	conn, err := net.Dial("tcp", s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "*2\r\n$9\r\nSUBSCRIBE\r\n$%d\r\n%s\r\n", len(channel), channel)
	sub := &subscriber{t: t, r: bufio.NewReader(conn)}
	sub.lines(6) // *3, subscribe, channel, :1
	return sub
}

func (s *subscriber) lines(n int) []string {
	s.t.Helper()
	var out []string
	for range n {
		l, err := s.r.ReadString('\n')
		if err != nil {
			s.t.Fatalf("subscriber: %v after %q", err, out)
		}
		out = append(out, strings.TrimRight(l, "\r\n"))
	}
	return out
}

// next is the payload of the next message.
func (s *subscriber) next() string {
	s.t.Helper()
	l := s.lines(7) // *3, $7, message, $n, channel, $n, payload
	return l[6]
}

// TestObservedNamesPublishLeaderChanged: on a master, a grant of an
// observed name (its agent's mark of it, once it stood), a SET and a
// retag publish leaderMessage; a grant of a
// name nobody observes publishes nothing (its release is the first
// message).
func TestObservedNamesPublishLeaderChanged(t *testing.T) {
	ctx := context.Background()
	servers := redistest.Start(t, 3)
	c := newCluster(t, servers, time.Second)
	sub := subscribe(t, servers[0], c.keys.Channel("o"))
	c.MarkObserved(ctx, "o", 5*time.Second)
	g, err := acquire(ctx, c, req("o", "h1"))
	if err != nil {
		t.Fatal(err)
	}
	if m := sub.next(); m != leaderMessage {
		t.Fatalf("grant of an observed name: %q", m)
	}
	if err := c.SetValue(ctx, "o", "h1", "v"); err != nil {
		t.Fatal(err)
	}
	if m := sub.next(); m != leaderMessage {
		t.Fatalf("SET: %q", m)
	}
	if n := c.Retag(ctx, "o", "h1", Record{Fence: g.Fence + 1, Who: Who{Owner: "next", Value: "w"}}); n < 2 {
		t.Fatalf("retag landed on %d masters", n)
	}
	if m := sub.next(); m != leaderMessage {
		t.Fatalf("retag: %q", m)
	}
	quiet := subscribe(t, servers[0], c.keys.Channel("u"))
	if _, err := acquire(ctx, c, req("u", "h2")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Release(ctx, "u", "h2"); err != nil {
		t.Fatal(err)
	}
	if m := quiet.next(); m != "u" {
		t.Fatalf("the first message of a name nobody observes: %q, want its release", m)
	}
}

// TestLeaderTakesOnlyAnAgreedFence: a holder whose masters record
// different fences (a grant's record before its fence is written back to
// all of them) is unsettled for Leader, though Who shows it with the
// fence a majority reaches (not yet the grant's: the grant is answered
// only once a majority records its fence), even when a majority records
// one of them; with lenient, the majority's fence is the term.
func TestLeaderTakesOnlyAnAgreedFence(t *testing.T) {
	ctx := context.Background()
	servers := redistest.Start(t, 3)
	c := newCluster(t, servers, time.Second)
	plant := func(s *redistest.Server, fence string) {
		plantClaim(s, "u", "h", Claim{})
		s.Do("HSET", "t:{u}:h:h", "fence", fence)
	}
	plant(servers[0], "5")
	plant(servers[1], "7")
	if who, err := c.Who(ctx, "u"); err != nil || len(who) != 1 || who[0].Record.Fence != 5 {
		t.Fatalf("Who = %+v, %v", who, err)
	}
	for _, lenient := range []bool{false, true} {
		if _, _, err := c.Leader(ctx, "u", lenient); !errors.Is(err, ErrUnsettled) {
			t.Fatalf("Leader (lenient %v) of a holder at fences 5 and 7: %v, want ErrUnsettled", lenient, err)
		}
	}
	plant(servers[2], "5")
	if who, err := c.Who(ctx, "u"); err != nil || len(who) != 1 || who[0].Record.Fence != 5 {
		t.Fatalf("Who of a holder at fences 5, 7, 5 = %+v, %v; want the majority's 5", who, err)
	}
	if _, _, err := c.Leader(ctx, "u", false); !errors.Is(err, ErrUnsettled) {
		t.Fatalf("Leader of a holder at fences 5, 7, 5: %v, want ErrUnsettled", err)
	}
	h, ok, err := c.Leader(ctx, "u", true)
	if err != nil || !ok || h.Record.Fence != 5 {
		t.Fatalf("lenient Leader of a holder at fences 5, 7, 5 = %+v, %v, %v; want fence 5", h, ok, err)
	}
	plant(servers[1], "5")
	if h, ok, err := c.Leader(ctx, "u", false); err != nil || !ok || h.Record.Fence != 5 {
		t.Fatalf("Leader of a holder at fence 5 everywhere = %+v, %v, %v", h, ok, err)
	}
	// A majority at one fence, and a master that answers without the
	// holder and has no counter (its next fence is the time's, far above):
	// it may not have run the grant yet, and its fence would be the
	// grant's. Unsettled, but for lenient.
	servers[2].Do("DEL", "t:{u}:h:h")
	if _, _, err := c.Leader(ctx, "u", false); !errors.Is(err, ErrUnsettled) {
		t.Fatalf("Leader of a holder at fence 5 on two masters of three: %v, want ErrUnsettled", err)
	}
	if h, ok, err := c.Leader(ctx, "u", true); err != nil || !ok || h.Record.Fence != 5 {
		t.Fatalf("lenient Leader of a holder at fence 5 on two masters = %+v, %v, %v", h, ok, err)
	}
	// That master would give no fence above 5 (its counter is at 4): it
	// cannot settle the grant higher, whether it runs it yet or refused it.
	servers[2].Do("SET", "t:{u}:fence", "4")
	if h, ok, err := c.Leader(ctx, "u", false); err != nil || !ok || h.Record.Fence != 5 {
		t.Fatalf("Leader of a holder at fence 5 on two masters, the third's next fence 5 = %+v, %v, %v", h, ok, err)
	}
	servers[2].Do("SET", "t:{u}:fence", "5")
	if _, _, err := c.Leader(ctx, "u", false); !errors.Is(err, ErrUnsettled) {
		t.Fatalf("Leader of a holder at fence 5 on two masters, the third's next fence 6: %v, want ErrUnsettled", err)
	}
}

// TestLeaderOfAHolderBehindAPausedMaster: a holder on two masters of three,
// one of them paused, shows on one answer only. That is not "none": the
// paused master may hold it (here it does), so Leader cannot tell, lenient
// or not. Once the holder is gone from the answering one, a majority is
// out of reach: none.
func TestLeaderOfAHolderBehindAPausedMaster(t *testing.T) {
	ctx := context.Background()
	servers := redistest.Start(t, 3)
	c := newCluster(t, servers, time.Second)
	for _, s := range servers[:2] {
		plantClaim(s, "p", "h", Claim{})
		s.Do("HSET", "t:{p}:h:h", "fence", "5")
	}
	servers[2].Do("SET", "t:{p}:fence", "4")
	if h, ok, err := c.Leader(ctx, "p", false); err != nil || !ok || h.Record.Fence != 5 {
		t.Fatalf("Leader of a holder on two masters = %+v, %v, %v", h, ok, err)
	}
	servers[0].Pause()
	defer servers[0].Resume()
	for _, lenient := range []bool{false, true} {
		if h, ok, err := c.Leader(ctx, "p", lenient); !errors.Is(err, ErrUnsettled) {
			t.Fatalf("Leader (lenient %v) with one of the holder's two masters paused = %+v, %v, %v; want ErrUnsettled", lenient, h, ok, err)
		}
	}
	servers[1].Do("DEL", "t:{p}:h:h")
	if h, ok, err := c.Leader(ctx, "p", false); err != nil || ok {
		t.Fatalf("Leader of a holder on the paused master only = %+v, %v, %v; want none", h, ok, err)
	}
}

// TestWhoShowsTheFenceAMajorityRecords: once a grant is answered, a
// majority records its fence; a master that ran it late records its own
// higher one, which WHO must not show as the holder's fence.
func TestWhoShowsTheFenceAMajorityRecords(t *testing.T) {
	ctx := context.Background()
	servers := redistest.Start(t, 3)
	c := newCluster(t, servers, time.Second)
	for i, f := range []string{"7", "7", "8"} {
		plantClaim(servers[i], "w", "h", Claim{})
		servers[i].Do("HSET", "t:{w}:h:h", "fence", f)
	}
	if who, err := c.Who(ctx, "w"); err != nil || len(who) != 1 || who[0].Record.Fence != 7 {
		t.Fatalf("Who of a holder at fences 7, 7, 8 = %+v, %v; want 7", who, err)
	}
}

// TestLeaderReadsAContendedGrantSettled: a grant that a master refused
// (another holder had it there) leaves that master's next fence above the
// grant's, so the masters alone cannot show the fence settled: that master
// may not have run the grant yet. The granting agent marks it settled in
// the records of the masters that granted it, which publishes on an
// observed name, and Leader then takes it without waiting to be lenient.
// Uncontended and unobserved, nothing is marked: every master records the
// fence.
func TestLeaderReadsAContendedGrantSettled(t *testing.T) {
	ctx := context.Background()
	servers := redistest.Start(t, 3)
	c := newCluster(t, servers, time.Second)
	g, refusal, err := c.Acquire(ctx, req("calm", "h"))
	if refusal != nil || err != nil {
		t.Fatal(refusal, err)
	}
	// A grant is answered once a majority has it; the third master may run
	// it a moment later (a quiet CI's read came first, and rightly found
	// the fence not settled). Every master records it, then.
	lockagenttest.Eventually(t, 5*time.Second, func() bool {
		return mastersWith(servers, func(s *redistest.Server) bool { return s.Keys("t:{calm}:h:h") > 0 }) == 3
	}, "the grant never reached every master")
	if h, ok, err := c.Leader(ctx, "calm", false); err != nil || !ok || h.Record.Fence != g.Fence {
		t.Fatalf("Leader of an uncontended grant = %+v, %v, %v; want fence %d", h, ok, err, g.Fence)
	}

	c.MarkObserved(ctx, "c", time.Minute)
	w := c.Watch(ctx, "c")
	defer w.Close()
	<-w.Recheck()
	plantClaim(servers[0], "c", "rival", Claim{})
	servers[0].Do("SET", "t:{c}:fence", "9999999999999999")
	g, refusal, err = c.Acquire(ctx, req("c", "h"))
	if refusal != nil || err != nil {
		t.Fatal(refusal, err)
	}
	select {
	case <-w.Leader():
	case <-time.After(5 * time.Second):
		t.Fatal("no leader message for the grant")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		h, ok, err := c.Leader(ctx, "c", false)
		if err == nil && ok && h.ID == "h" && h.Record.Fence == g.Fence {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Leader of a grant one master refused = %+v, %v, %v; want h at fence %d, settled", h, ok, err, g.Fence)
		}
		select { // the mark publishes: read again when it lands
		case <-w.Leader():
		case <-time.After(time.Until(deadline)):
		}
	}
	if got, _ := servers[0].Do("HGET", "t:{c}:h:h", "settled"); got != "" {
		t.Fatalf("the refusing master has a record of the grant marked %q", got)
	}
	// The uncontended grant's writes, if any (write-backs to masters behind
	// its fence), went before the contended grant's on each connection:
	// they have landed, and marked nothing.
	for i, s := range servers {
		if got, _ := s.Do("HGET", "t:{calm}:h:h", "settled"); got != "" {
			t.Fatalf("master %d marks an uncontended grant settled (%q): a write no reader needs", i, got)
		}
	}
}

// TestLeaderWithAMasterUnheard: a holder on the two masters that answer,
// the third paused. Unmarked, its fence may not be the term's (the
// unheard master may have granted the holder a higher one, which the
// grant then took), so Leader cannot tell but leniently; marked settled,
// it can.
func TestLeaderWithAMasterUnheard(t *testing.T) {
	ctx := context.Background()
	servers := redistest.Start(t, 3)
	c := newCluster(t, servers, time.Second)
	for _, s := range servers[:2] {
		plantClaim(s, "p", "h", Claim{})
		s.Do("HSET", "t:{p}:h:h", "fence", "5")
	}
	servers[2].Pause()
	defer servers[2].Resume()
	if h, ok, err := c.Leader(ctx, "p", false); !errors.Is(err, ErrUnsettled) {
		t.Fatalf("Leader of an unmarked holder on the two masters that answer = %+v, %v, %v; want ErrUnsettled", h, ok, err)
	}
	if h, ok, err := c.Leader(ctx, "p", true); err != nil || !ok || h.Record.Fence != 5 {
		t.Fatalf("lenient Leader of a holder on the two masters that answer = %+v, %v, %v; want fence 5", h, ok, err)
	}
	servers[1].Do("HSET", "t:{p}:h:h", "settled", "4") // a stale mark: not the fence the record carries
	if _, _, err := c.Leader(ctx, "p", false); !errors.Is(err, ErrUnsettled) {
		t.Fatalf("Leader of a holder marked settled at another fence: %v, want ErrUnsettled", err)
	}
	servers[1].Do("HSET", "t:{p}:h:h", "settled", "5")
	if h, ok, err := c.Leader(ctx, "p", false); err != nil || !ok || h.Record.Fence != 5 {
		t.Fatalf("Leader of a holder marked settled on a master that answers = %+v, %v, %v; want fence 5", h, ok, err)
	}
}

// TestLeaderDoesNotWaitForAPausedVoter: a master paused but not known to
// be down yet (no probe has failed) still gets every round. A read whose
// other answers decide does not wait for it: an observer's push would
// otherwise wait a round's deadline at every change until the probes
// mark it down.
func TestLeaderDoesNotWaitForAPausedVoter(t *testing.T) {
	ctx := context.Background()
	servers := redistest.Start(t, 3)
	cfg := testConfig(t, servers, time.Second, true)
	cfg.MasterTimeout = 3 * time.Second // a read that waits for the paused master takes this long
	c := startCluster(t, cfg)
	plantClaim(servers[2], "s", "rival", Claim{})
	g, refusal, err := c.Acquire(ctx, req("s", "h")) // contended: marked settled
	if refusal != nil || err != nil {
		t.Fatal(refusal, err)
	}
	// The mark is written in the background: wait for it. A read before
	// it lands is unsettled with the master paused, and waits its
	// deadline: the very delay measured below.
	marked := func() bool {
		for _, s := range servers[:2] {
			if got, _ := s.Do("HGET", "t:{s}:h:h", "settled"); got == strconv.FormatInt(g.Fence, 10) {
				return true
			}
		}
		return false
	}
	lockagenttest.Eventually(t, 10*time.Second, marked, "the contended grant was never marked settled")
	servers[2].Pause()
	defer servers[2].Resume()
	for _, want := range []string{"h", ""} {
		start := time.Now()
		h, ok, err := c.Leader(ctx, "s", false)
		if took := time.Since(start); err != nil || ok != (want != "") || h.ID != want || took >= cfg.MasterTimeout {
			t.Fatalf("Leader with a paused voter = %+v, %v, %v after %v; want %q (%d), before the paused master's deadline", h, ok, err, took, want, g.Fence)
		}
		if _, err := c.Release(ctx, "s", "h"); err != nil && want != "" {
			t.Fatal(err)
		}
	}
}

// awaitSubscribed waits until every master has c's subscription to name's
// channel: a Watch subscribes in the background, and a message published
// before it lands is lost to it.
func awaitSubscribed(t testing.TB, c *Cluster, servers []*redistest.Server, name string) {
	t.Helper()
	for i, s := range servers {
		lockagenttest.Eventually(t, 5*time.Second, func() bool {
			n, _ := s.Do("EVAL", "return redis.call('PUBSUB', 'NUMSUB', ARGV[1])[2]", "0", c.keys.Channel(name))
			return n == "1"
		}, "master %d: never subscribed to %s", i, name)
	}
}

// TestClosedWatchesLeaveNoSubscription: a burst of watches, each closed as
// soon as a master confirmed it, leaves no channel subscribed on any
// master: an unsubscription that waited its turn behind the burst's
// subscriptions is still sent (its deadline counts from its turn), or its
// connection is made anew with only the channels watched.
func TestClosedWatchesLeaveNoSubscription(t *testing.T) {
	servers := redistest.Start(t, 3)
	c := newCluster(t, servers, time.Second)
	const n = 6000
	closeManyWatches(t, c, n)
	left := func() (sum int) {
		for _, s := range servers {
			r, err := s.Do("PUBSUB", "NUMPAT") // keeps the connection count honest: NUMPAT is 0
			if err != nil || r != "0" {
				t.Fatalf("PUBSUB NUMPAT: %q %v", r, err)
			}
			r, err = s.Do("PUBSUB", "CHANNELS", "t:*")
			if err != nil {
				t.Fatal(err)
			}
			k, _ := strconv.Atoi(r)
			sum += k
		}
		return sum
	}
	k := 0
	lockagenttest.Eventually(t, 10*time.Second, func() bool { k = left(); return k == 0 }, // polls the masters: no event says an unsubscription landed
		"%d channels still subscribed on the masters after %d watches were closed", &k, n)
}

// TestWatchesClosedTogetherUnsubscribeTogether: the unsubscriptions of
// watches closed at once go to each master in a few UNSUBSCRIBEs, not one
// each. One each, waiting their turns, 6000 closed watches were still
// being unsubscribed 5 to 8 seconds later on a loaded host, and past the
// 10s of TestClosedWatchesLeaveNoSubscription under the whole suite.
func TestWatchesClosedTogetherUnsubscribeTogether(t *testing.T) {
	servers := redistest.Start(t, 3)
	c := newCluster(t, servers, time.Second)
	const n = 1000
	watches := make([]*Watch, n)
	for i := range watches {
		watches[i] = c.Watch(context.Background(), fmt.Sprintf("together%d", i))
	}
	subscribed := func(want int) func() bool {
		return func() bool {
			for _, s := range servers {
				if r, _ := s.Do("PUBSUB", "CHANNELS", "t:*"); r != strconv.Itoa(want) {
					return false
				}
			}
			return true
		}
	}
	lockagenttest.Eventually(t, 10*time.Second, subscribed(n), "the %d watches were never all subscribed", n)
	before := make([]int, len(servers))
	for i, s := range servers {
		before[i] = commandCalls(t, s, "unsubscribe")
	}
	for _, w := range watches {
		w.Close()
	}
	lockagenttest.Eventually(t, 10*time.Second, subscribed(0), "the %d closed watches were never all unsubscribed", n)
	for i, s := range servers {
		if calls := commandCalls(t, s, "unsubscribe") - before[i]; calls > n/2 {
			t.Errorf("master %d: %d UNSUBSCRIBEs for %d watches closed at once", i, calls, n)
		} else {
			t.Logf("master %d: %d UNSUBSCRIBEs for %d watches closed at once", i, calls, n)
		}
	}
}

func TestWantedMessagesReadBack(t *testing.T) {
	for _, tc := range []struct {
		name, message string
		instance      string
		want          Want
		ok            bool
	}{
		{"an exclusive want of two", Want{Count: 2}.message("a/1"), "a/1", Want{Count: 2}, true},
		{"a shared want of one", Want{Shared: true, Count: 1}.message("b/2"), "b/2", Want{Shared: true, Count: 1}, true},
		{"a count under one is said as one", Want{Count: 0}.message("c/3"), "c/3", Want{Count: 1}, true},
		{"an agent from before Want names only itself: exclusive, one", "wanted old/9", "old/9", Want{Count: 1}, true},
		{"a count that is not a number is one", "wanted x/1 shared lots", "x/1", Want{Shared: true, Count: 1}, true},
		{"a message with no instance is no want", "wanted ", "", Want{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			instance, want, ok := parseWant(tc.message)
			if instance != tc.instance || want != tc.want || ok != tc.ok {
				t.Fatalf("parseWant(%q) = %q %+v %v, want %q %+v %v", tc.message, instance, want, ok, tc.instance, tc.want, tc.ok)
			}
		})
	}
}

// TestACheckMeetingAHalfLandedChangeReadsAgain: with one master of three
// down, the other two are the whole majority, and while a change lands on
// them one after the other (here a release) they disagree: one records the
// holder, one does not. That is no majority unreachable: Check reads
// again until they agree, and answers. A disagreement that does not end
// (the change stopped half-way) is NO_QUORUM after checkPatience.
// Before, Check answered at once, and by which master answered first:
// false (the holder might be on a majority), or NO_QUORUM. A CHECK from
// another agent right after a cohort hand-over, with a master paused,
// failed so (TestBreaker18CheckAfterHandOversWithAMasterPaused).
func TestACheckMeetingAHalfLandedChangeReadsAgain(t *testing.T) {
	servers := redistest.Start(t, 3)
	c := newCluster(t, servers, time.Second)
	ctx := context.Background()
	g, err := acquire(ctx, c, req("hl", "h"))
	if err != nil {
		t.Fatal(err)
	}
	holder := c.keys.Holder("hl", "h")
	for i, s := range servers { // the grant's fence, written back to any master behind it
		var f string
		lockagenttest.Eventually(t, 2*time.Second, func() bool { f, _ = s.Do("HGET", holder, "fence"); return f == strconv.FormatInt(g.Fence, 10) },
			"master %d: fence %q, want %d", i, &f, g.Fence)
	}
	servers[2].Pause()
	defer servers[2].Resume()
	waitStates(t, c, func(st []MasterStatus) bool { return st[2].State == StateDown })

	// The release has landed on m1, not yet on m0.
	servers[1].Do("SREM", c.keys.Set("hl"), "h")
	servers[1].Do("DEL", holder)
	// Check's reads of m0: its scripts that name hl (the probes name none).
	readTwice := make(chan struct{})
	reads := 0
	servers[0].Monitor(func(cmd redistest.Command) bool {
		if cmd.Script || !strings.HasPrefix(strings.ToUpper(cmd.Args[0]), "EVAL") ||
			!slices.ContainsFunc(cmd.Args, func(a string) bool { return strings.Contains(a, "{hl}") }) {
			return true
		}
		if reads++; reads == 2 {
			close(readTwice)
			return false
		}
		return true
	})
	type outcome struct {
		current bool
		err     error
	}
	done := make(chan outcome, 1)
	go func() {
		current, err := c.Check(ctx, "hl", g.Fence)
		done <- outcome{current, err}
	}()
	// Once Check has read m0 twice (it read, and read again), the release
	// lands on m0 too.
	select {
	case <-readTwice:
	case o := <-done:
		t.Fatalf("Check of masters that disagree = %v, %v at once; want it to read again", o.current, o.err)
	}
	servers[0].Do("SREM", c.keys.Set("hl"), "h")
	servers[0].Do("DEL", holder)
	if o := <-done; o.err != nil || o.current {
		t.Fatalf("Check while the release landed = %v, %v; want false once both masters agree", o.current, o.err)
	}

	// A disagreement that lasts: m0 records a holder m1 does not.
	plantHolder(servers[0], c.keys.Set("hl"), "h2")
	servers[0].Do("HSET", c.keys.Holder("hl", "h2"), "fence", strconv.FormatInt(g.Fence+1, 10))
	start := time.Now()
	_, err = c.Check(ctx, "hl", g.Fence+1)
	if !errors.Is(err, ErrNoQuorum) {
		t.Fatalf("Check with masters that keep disagreeing = %v, want NO_QUORUM", err)
	}
	if took := time.Since(start); took < c.checkPatience()/2 {
		t.Fatalf("Check gave up on masters that disagree after %v, patience %v", took, c.checkPatience())
	}
}
