package quorum

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// counter reads a name's fence counter on one master (0 if it has none).
func counter(t testing.TB, s *redistest.Server, name string) int64 {
	t.Helper()
	v, _ := s.Do("GET", "t:{"+name+"}:fence")
	n, _ := strconv.ParseInt(v, 10, 64)
	return n
}

// awaitCounters waits until every master's counter of name is at least top:
// write-backs to masters the round did not wait for land in the background.
func awaitCounters(t testing.TB, servers []*redistest.Server, name string, top int64) {
	t.Helper()
	low := -1
	lockagenttest.Eventually(t, 2*time.Second, func() bool {
		low = -1
		for i, s := range servers {
			if counter(t, s, name) < top {
				low = i
			}
		}
		return low < 0
	}, "master %d counts below the block's end %d for %s", &low, top, name)
}

func blockReq(name, holder string, block int) AcquireRequest {
	r := req(name, holder)
	r.FenceBlock = block
	return r
}

func TestAFenceBlockIsReservedOnTheMasters(t *testing.T) {
	servers := redistest.Start(t, 3)
	c := newCluster(t, servers, time.Second)
	ctx := context.Background()
	g, err := acquire(ctx, c, blockReq("b", "h1", 8))
	if err != nil {
		t.Fatal(err)
	}
	if g.Record.Top != g.Fence+7 {
		t.Fatalf("grant %+v: top %d, want fence+7", g, g.Record.Top)
	}
	awaitCounters(t, servers, "b", g.Record.Top)
	for i, s := range servers {
		if v, _ := s.Do("HGET", "t:{b}:h:h1", "fence"); v != strconv.FormatInt(g.Fence, 10) {
			t.Fatalf("master %d records fence %q, want the block's first %d", i, v, g.Fence)
		}
	}
	c.Release(ctx, "b", "h1")
	for round, block := range []int{1, 3, 0} {
		g2, err := acquire(ctx, c, blockReq("b", fmt.Sprintf("h%d", round+2), block))
		if err != nil {
			t.Fatal(err)
		}
		if g2.Fence <= g.Record.Top {
			t.Fatalf("block %d: fence %d after a block that ended at %d", block, g2.Fence, g.Record.Top)
		}
		if want := g2.Fence + int64(max(block, 1)) - 1; g2.Record.Top != want {
			t.Fatalf("block %d: top %d, want %d", block, g2.Record.Top, want)
		}
		c.Release(ctx, "b", fmt.Sprintf("h%d", round+2))
		g = g2
	}
}

// TestFenceBlocksGrowAcrossShiftingMajorities: the write-back of a grant
// that some masters counted behind raises them to the end of its block, so
// the next grant, through another majority, counts past every fence of it.
func TestFenceBlocksGrowAcrossShiftingMajorities(t *testing.T) {
	t.Parallel() // waits out faults and quarantines; judges no latency
	servers := redistest.Start(t, 3)
	c := newCluster(t, servers, time.Second)
	ctx := context.Background()
	// One master far ahead: the grant takes its count, the others are written back.
	if _, err := servers[1].Do("SET", "t:{s}:fence", strconv.FormatInt(time.Now().Unix()*1_000_000+5_000_000, 10)); err != nil {
		t.Fatal(err)
	}
	var top int64
	for round := range 9 {
		paused := servers[round%3]
		paused.Pause()
		waitStates(t, c, func(st []MasterStatus) bool { return st[round%3].State == StateDown })
		g, holder, err := acquireWithRetries(ctx, c, func(try int) AcquireRequest {
			return blockReq("s", fmt.Sprintf("h%d-%d", round, try), 1+round%4*10)
		})
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if g.Fence <= top {
			t.Fatalf("round %d: fence %d not past the last block's end %d", round, g.Fence, top)
		}
		top = g.Record.Top
		var up []*redistest.Server
		for i, s := range servers {
			if i != round%3 {
				up = append(up, s)
			}
		}
		awaitCounters(t, up, "s", top)
		if _, err := c.Release(ctx, "s", holder); err != nil {
			t.Fatal(err)
		}
		paused.Resume()
		waitStates(t, c, func(st []MasterStatus) bool { return st[round%3].State == StateUp })
	}
}

// TestRepairRaisesTheCounterToTheBlocksEnd: a master that missed the grant
// and has the hold re-created by a renewal counts past the whole block.
func TestRepairRaisesTheCounterToTheBlocksEnd(t *testing.T) {
	servers := redistest.Start(t, 3)
	c := newCluster(t, servers, time.Second)
	ctx := context.Background()
	c.masters[2].mu.Lock()
	c.masters[2].state = StateDown
	c.masters[2].mu.Unlock()
	g, err := acquire(ctx, c, blockReq("r", "h", 16))
	if err != nil {
		t.Fatal(err)
	}
	c.masters[2].mu.Lock()
	c.masters[2].state = StateUp
	c.masters[2].mu.Unlock()
	if n := counter(t, servers[2], "r"); n != 0 {
		t.Fatalf("the down master counts %d", n)
	}
	res := c.Renew(ctx, 5*time.Second, []RenewKey{{Name: "r", Holder: "h", Record: g.Record}})
	if res[0].Repaired != 1 {
		t.Fatalf("renew %+v", res[0])
	}
	if n := counter(t, servers[2], "r"); n != g.Record.Top {
		t.Fatalf("the repaired master counts %d, want the block's end %d", n, g.Record.Top)
	}
	if v, _ := servers[2].Do("HGET", "t:{r}:h:h", "fence"); v != strconv.FormatInt(g.Fence, 10) {
		t.Fatalf("re-created record has fence %q, want %d", v, g.Fence)
	}
}

func TestRetagNamesTheNewHolderOfALiveRecordOnly(t *testing.T) {
	servers := redistest.Start(t, 3)
	c := newCluster(t, servers, time.Second)
	ctx := context.Background()
	g, err := acquire(ctx, c, blockReq("t", "h", 4))
	if err != nil {
		t.Fatal(err)
	}
	next := g.Record
	next.Fence = g.Fence + 1
	next.Who = Who{Agent: "t", PID: 7, UID: 8, Owner: "second", SinceMilli: 99}
	if n := c.Retag(ctx, "t", "h", next); n < 2 {
		t.Fatalf("retag landed on %d masters", n)
	}
	who, err := c.Who(ctx, "t")
	if err != nil || len(who) != 1 || who[0].ID != "h" || who[0].Record.Who != next.Who || who[0].Record.Fence != next.Fence {
		t.Fatalf("who = %+v, %v; want %+v with fence %d", who, err, next.Who, next.Fence)
	}
	if n := counter(t, servers[0], "t"); n != g.Record.Top {
		t.Fatalf("retag moved the counter to %d", n)
	}
	c.Release(ctx, "t", "h")
	awaitKeys(t, servers, "t:{t}:h:h")
	if n := c.Retag(ctx, "t", "h", next); n != 0 {
		t.Fatalf("a released record was retagged on %d masters", n)
	}
	for _, s := range servers {
		if s.Keys("t:{t}:h:h") != 0 {
			t.Fatal("retag re-created a released record")
		}
	}
}

// TestWantedReachesTheOtherAgentsWatchOnly: the message that an agent
// waits for a name reaches the watches of other agents, not its own, and
// wakes no waiter; the holder reads what the waiter said of its waiters.
func TestWantedReachesTheOtherAgentsWatchOnly(t *testing.T) {
	servers := redistest.Start(t, 3)
	holder := newCluster(t, servers, time.Second)
	waiter := runCluster(t, testConfig(t, servers, time.Second, false))
	waitSubscribed(t, holder)
	w := holder.Watch(context.Background(), "n")
	defer w.Close()
	drainWake(w)
	holder.Wanted("n", Want{}) // its own: ignored
	select {
	case <-w.Wanted():
		t.Fatal("an agent heard its own wanted message")
	case <-w.C():
		t.Fatal("a wanted message woke a waiter")
	case <-time.After(100 * time.Millisecond):
	}
	waitStates(t, waiter, func(st []MasterStatus) bool { return st[0].State == StateUp })
	waiter.Wanted("n", Want{Shared: true, Count: 3})
	select {
	case <-w.Wanted():
	case <-w.C():
		t.Fatal("a wanted message woke a waiter")
	case <-time.After(time.Second):
		t.Fatal("the holder never heard that the name is wanted")
	}
	wants := w.Wants()
	if len(wants) != 1 || wants[waiter.cfg.InstanceID] != (Want{Shared: true, Count: 3}) {
		t.Fatalf("the holder read %v, want the waiter's shared want of 3", wants)
	}
	if again := w.Wants(); again != nil {
		t.Fatalf("Wants read %v a second time, want nothing new", again)
	}
}

// TestAReserveCountsPastEveryFence: a further block reserved for a hold
// starts past the hold's own block and past a counter that masters raised
// further (as after grants they alone saw), is settled on a majority before
// Reserve returns, leaves the record's fence as it was, and the next grant
// counts past it. A hold that is not there, or masters that lost their
// data, get no block.
func TestAReserveCountsPastEveryFence(t *testing.T) {
	servers := redistest.Start(t, 3)
	c := newCluster(t, servers, time.Minute)
	ctx := context.Background()
	g, err := acquire(ctx, c, blockReq("r", "h1", 4))
	if err != nil {
		t.Fatal(err)
	}
	awaitCounters(t, servers, "r", g.Record.Top)
	// Any two masters include one of these two, so the block starts past
	// top+1000 whichever two answer first.
	servers[1].Do("SET", "t:{r}:fence", strconv.FormatInt(g.Record.Top+1000, 10))
	servers[2].Do("SET", "t:{r}:fence", strconv.FormatInt(g.Record.Top+2000, 10))
	first, err := c.Reserve(ctx, "r", "h1", 4)
	if err != nil {
		t.Fatal(err)
	}
	if first <= g.Record.Top+1000 {
		t.Fatalf("reserved from %d, not past a majority's counters (%d, %d)", first, g.Record.Top+1000, g.Record.Top+2000)
	}
	settled := 0
	for i, s := range servers {
		if counter(t, s, "r") >= first+3 {
			settled++
		}
		if v, _ := s.Do("HGET", "t:{r}:h:h1", "fence"); v != strconv.FormatInt(g.Fence, 10) {
			t.Fatalf("master %d records fence %q, want the holder's %d", i, v, g.Fence)
		}
	}
	if settled < 2 {
		t.Fatalf("the block's end %d is on %d masters when Reserve returned, want a majority", first+3, settled)
	}
	if _, err := c.Reserve(ctx, "r", "h9", 4); !errors.Is(err, ErrNoQuorum) {
		t.Fatalf("a block for a hold that is not there: %v, want NO_QUORUM", err)
	}
	c.Release(ctx, "r", "h1")
	g2, err := acquire(ctx, c, req("r", "h2"))
	if err != nil {
		t.Fatal(err)
	}
	if g2.Fence <= first+3 {
		t.Fatalf("fence %d granted after a block reserved up to %d", g2.Fence, first+3)
	}
	for _, s := range servers[:2] {
		s.Do("FLUSHALL")
	}
	if _, err := c.Reserve(ctx, "r", "h2", 4); !errors.Is(err, ErrNoQuorum) {
		t.Fatalf("a block from masters that lost their data: %v, want NO_QUORUM", err)
	}
}

// TestAMasterThatAnswersAfterTheRoundIsRaisedToTheFence: a master whose
// answer comes after a majority decided the round (it is paused for less
// than the round's timeout) is brought up to the grant's fence when its
// answer comes, though it counted far behind: a later majority that
// includes it must not count below this grant.
func TestAMasterThatAnswersAfterTheRoundIsRaisedToTheFence(t *testing.T) {
	servers := redistest.Start(t, 3)
	c := newCluster(t, servers, time.Second)
	ahead := strconv.FormatInt(time.Now().Unix()*1_000_000+5_000_000, 10)
	for _, s := range servers[1:] {
		if _, err := s.Do("SET", "t:{late}:fence", ahead); err != nil {
			t.Fatal(err)
		}
	}
	servers[0].Pause() // its answer can come only after the round is decided
	g, err := acquire(context.Background(), c, req("late", "h"))
	servers[0].Resume()
	if err != nil {
		t.Fatal(err)
	}
	if g.Fence <= 1 {
		t.Fatalf("fence %d: the grant did not take the count of the masters ahead", g.Fence)
	}
	awaitCounters(t, servers[:1], "late", g.Fence)
}
