package tests

import (
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// The seams of issue 17: the fair queue, and a cohort run, while masters
// lose their data. The agents run with a lease of 1s and lock.max_ttl 1s,
// so that a master that lost its data sits out a quarantine of 1s and then
// votes again, empty, while the queue or the run goes on.

// dataLoss is a way for masters to lose their data.
type dataLoss struct {
	name string
	// all says every master loses its data: a majority did not keep it, so
	// the fair queue's order across agents is not promised (see
	// TestFairQueueUnderDataLoss).
	all  bool
	lose func(t *testing.T, servers []*redistest.Server)
}

func restartEmpty(i int) func(*testing.T, []*redistest.Server) {
	return func(t *testing.T, servers []*redistest.Server) { servers[i].Restart() }
}

func flush(which ...int) func(*testing.T, []*redistest.Server) {
	return func(t *testing.T, servers []*redistest.Server) {
		for _, i := range which {
			if _, err := servers[i].Do("FLUSHALL"); err != nil {
				t.Error(err)
			}
		}
	}
}

// awaitMasters waits until every one of conns (one per agent) sees n
// masters in state.
func awaitMasters(conns []*agenttest.Conn, within time.Duration, state string, n int) {
	for _, c := range conns {
		c.AwaitMastersWithin(within, state, n)
	}
}

// TestFairQueueUnderDataLoss: fair waiters queued on two agents in turn,
// each sent once the one before it is in the masters' queue (awaitQueued),
// are granted while masters lose their data mid-queue: one waiter holds
// across the loss, the next until the emptied master votes again, and the
// rest are granted with it voting. What the protocol promises is checked,
// exactly:
//   - always: no two holds overlap, every grant's fence is above the one
//     before, every waiter is granted (live waiters never leave the queue),
//     and one agent's waiters are granted in their arrival order;
//   - while a majority kept its data (one master lost it): the order of
//     arrival across both agents, exactly (lock-kinds.md: "if A's queue
//     entry reached a majority before B's LOCK arrived at its agent, A is
//     granted first").
func TestFairQueueUnderDataLoss(t *testing.T) {
	t.Parallel() // see TestMain
	for _, loss := range []dataLoss{
		{name: "a master restarts empty", lose: restartEmpty(1)},
		{name: "a master is flushed", lose: flush(1)},
		{name: "every master is flushed", all: true, lose: flush(0, 1, 2)},
	} {
		t.Run(loss.name, func(t *testing.T) {
			held := fairUnderLoss(t, loss)
			checkExclusive(t, held, 0)
			var order []int
			for _, h := range held[1:] { // after the first holder
				order = append(order, h.who)
			}
			for agent := range 2 {
				var mine []int
				for _, w := range order {
					if w%2 == agent {
						mine = append(mine, w)
					}
				}
				if !slices.IsSorted(mine) {
					t.Fatalf("agent %d's waiters granted in the order %v", agent, mine)
				}
			}
			if !loss.all && !slices.IsSorted(order) {
				t.Fatalf("granted in the order %v, not the order of arrival, though a majority kept its data", order)
			}
			t.Logf("granted in the order %v, fences growing, no overlap", order)
		})
	}
}

// fairUnderLoss runs TestFairQueueUnderDataLoss's queue and returns every
// hold, the first holder's (who -1) first, then sorted by start.
func fairUnderLoss(t *testing.T, loss dataLoss) []interval {
	const n, lossAt = 8, 2
	a, b, _, servers := dataLossAgents(t, time.Second, time.Second)
	watchers := []*agenttest.Conn{agenttest.Dial(t, a.Config.Socket.Path), agenttest.Dial(t, b.Config.Socket.Path)}
	holder := agenttest.Dial(t, a.Config.Socket.Path)
	first := holder.Do("LOCK q fair=true")
	if first.Kind != "OK" {
		t.Fatal(first.Line)
	}
	held := []interval{{start: time.Now(), fence: first.Int("fence"), who: -1}}
	conns := make([]*agenttest.Conn, n)
	chans := make([]<-chan agenttest.Reply, n)
	for i := range n {
		conns[i] = agenttest.Dial(t, []*agenttest.Agent{a, b}[i%2].Config.Socket.Path)
		_, chans[i] = conns[i].Send("LOCK q fair=true wait=30s")
		awaitQueued(t, watchers[0], "q", int64(i+1))
	}
	lossStart, lossDone, returned := make(chan struct{}), make(chan struct{}), make(chan struct{})
	// How long waiter i holds: across the loss (until its LOST, when every
	// master lost its data), until the emptied master is back, or 20ms.
	until := func(i int) <-chan struct{} {
		switch {
		case i == lossAt && loss.all:
			close(lossStart)
			return nil
		case i == lossAt:
			close(lossStart)
			return lossDone
		case i == lossAt+1:
			return returned
		}
		done := make(chan struct{})
		time.AfterFunc(20*time.Millisecond, func() { close(done) })
		return done
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if iv, ok := holdFair(t, conns[i], chans[i], i, until); ok {
				mu.Lock()
				held = append(held, iv)
				mu.Unlock()
			}
		}()
	}
	held[0].end = time.Now()
	holder.Do("UNLOCK q")
	select {
	case <-lossStart:
	case <-time.After(30 * time.Second):
		t.Fatalf("waiter %d was never granted", lossAt)
	}
	loss.lose(t, servers)
	if !loss.all {
		awaitMasters(watchers, 5*time.Second, "quarantined", 1)
	}
	close(lossDone)
	awaitMasters(watchers, 10*time.Second, "up", 3)
	close(returned)
	wg.Wait()
	if len(held) != n+1 {
		t.Fatalf("%d of %d waiters granted", len(held)-1, n)
	}
	sort.Slice(held[1:], func(i, j int) bool { return held[1+i].start.Before(held[1+j].start) })
	return held
}

// holdFair awaits waiter who's grant on c and holds it until until(who)
// closes or its LOST arrives, then UNLOCKs it. It returns the hold, from
// its OK until its UNLOCK was sent or its LOST arrived.
func holdFair(t *testing.T, c *agenttest.Conn, ch <-chan agenttest.Reply, who int, until func(int) <-chan struct{}) (interval, bool) {
	var r agenttest.Reply
	select {
	case r = <-ch:
	case <-time.After(40 * time.Second):
		t.Errorf("waiter %d: no answer", who)
		return interval{}, false
	}
	if r.Kind != "OK" {
		t.Errorf("waiter %d: %s", who, r.Line)
		return interval{}, false
	}
	iv := interval{start: time.Now(), fence: r.Int("fence"), who: who}
	select {
	case p := <-c.Pushes():
		iv.end = time.Now()
		if !strings.HasPrefix(p, "* LOST q ") {
			t.Errorf("waiter %d: unexpected push %q", who, p)
		}
	case <-until(who):
		iv.end = time.Now()
		_, unlocked := c.Send("UNLOCK q")
		<-unlocked // NOT_HELD if a LOST races it: the hold ended either way
	case <-time.After(10 * time.Second):
		t.Errorf("waiter %d: held for 10s, and no LOST", who)
		iv.end = time.Now()
	}
	return iv, true
}

// TestCohortRunUnderDataLoss: ten clients of one agent take turns on one
// name, so that it passes the name among them (hand-overs, with fences
// from the blocks its grants reserved), while three clients of another
// agent contend, and one master loses its data mid-run, sits out its
// quarantine, and votes again empty. No two holds overlap, fences grow
// strictly in grant order across both agents, and before the loss, during
// the quarantine and after it most local grants are hand-overs (told apart
// by their fences: see mastersGrants; a phase of fewer than 10 local
// grants, as a starved host makes in the quarantine, is not judged), and
// the other agent is granted too.
func TestCohortRunUnderDataLoss(t *testing.T) {
	t.Parallel() // its own masters and agents; judges no latency
	for _, loss := range []dataLoss{
		{name: "a master restarts empty", lose: restartEmpty(0)},
		{name: "a master is flushed", lose: flush(0)},
	} {
		t.Run(loss.name, func(t *testing.T) {
			const local, remote = 10, 3
			a, b, _, servers := dataLossAgents(t, time.Second, time.Second)
			watchers := []*agenttest.Conn{agenttest.Dial(t, a.Config.Socket.Path), agenttest.Dial(t, b.Config.Socket.Path)}
			granted := mastersGrants(t, servers[2], a.Config.Lock.KeyPrefix, "run")
			run := startChurn(t, a, b, "run", local, remote)
			// Each phase by grants is as long as the host is fast: a run of
			// local hand-overs can make the first hundred before the other
			// agent's waiter is heard (a quiet host did, 116 of 118), so a
			// phase also waits for a grant on the other agent.
			run.awaitGrants(t, 100)
			run.awaitRemoteSince(t, time.Time{})
			loss.lose(t, servers)
			lost := time.Now()
			awaitMasters(watchers, 5*time.Second, "quarantined", 1)
			awaitMasters(watchers, 10*time.Second, "up", 3)
			back := time.Now()
			run.awaitGrants(t, run.grants.Load()+100)
			run.awaitRemoteSince(t, back)
			held := run.stop()
			checkExclusive(t, held, local)
			fromMasters := granted()
			phases := [3]struct{ grants, handOvers, remote int }{}
			for _, h := range held {
				p := 0
				switch {
				case h.start.After(back):
					p = 2
				case h.start.After(lost):
					p = 1
				}
				phases[p].grants++
				if h.who >= local {
					phases[p].remote++
				}
				if h.who < local && !fromMasters[h.fence] {
					phases[p].handOvers++
				}
			}
			t.Logf("before the loss, during the quarantine, after it: %+v (%d fences from the masters)", phases, len(fromMasters))
			// Most local grants are hand-overs while the run goes on (about
			// nine in ten here; with cohorting off, a few in a hundred). The
			// quarantine's phase is as long as the quarantine, not a number
			// of grants: it makes some 300 local grants, but a soak run
			// beside two CPU hogs made 6 (2 passed on; a record is lent only
			// while valid for half a lease, and renewals on the two voting
			// masters ran late), too few to judge a share by; another made
			// 3, none passed on. A phase of fewer than 20 local grants must
			// pass the name on at least once; one of fewer than 10 says
			// nothing of the run (the phases before and after the loss do).
			for p, ph := range phases {
				local := ph.grants - ph.remote
				few := local < 20 && ph.handOvers > 0
				if local < 10 {
					t.Logf("phase %d: %d local grants, too few to judge the run by", p, local)
					few = true
				}
				if (ph.handOvers*2 < local && !few) || ph.remote == 0 {
					t.Fatalf("phase %d: %d of %d local grants were hand-overs, %d grants on the other agent: the run stopped passing the name, or starved the other agent: %+v",
						p, ph.handOvers, local, ph.remote, phases)
				}
			}
		})
	}
}

// mastersGrants watches server (MONITOR), a master that keeps its data,
// for the grants of name that the masters made, and returns a function
// that waits until the server has run what was sent to it so far and
// returns their fences. A grant whose fence is not among them was a
// hand-over within an agent: it took a fence of a block that an earlier
// grant reserved, and made no record. (A grant that a majority made
// without this master counts as one too: a few in a hundred grants, when
// the agents split a vote.)
func mastersGrants(t *testing.T, server *redistest.Server, prefix, name string) (wait func() map[int64]bool) {
	t.Helper()
	const end = "lock-agent-test: end of grants"
	record := prefix + "{" + name + "}:h:"
	fences := map[int64]bool{}
	done := server.Monitor(func(c redistest.Command) bool {
		if len(c.Args) == 2 && strings.EqualFold(c.Args[0], "echo") && c.Args[1] == end {
			return false
		}
		if !c.Script || len(c.Args) < 4 || !strings.EqualFold(c.Args[0], "hset") || !strings.HasPrefix(c.Args[1], record) {
			return true
		}
		// The acquire script's record (mode first), or the grant's fence
		// written back to it when the masters were not in step (the fence
		// alone; a hand-over's retag writes the who-info with it).
		if c.Args[2] == "mode" || (c.Args[2] == "fence" && len(c.Args) == 4) {
			if i := slices.Index(c.Args, "fence"); i > 0 && i+1 < len(c.Args) {
				if f, err := strconv.ParseInt(c.Args[i+1], 10, 64); err == nil {
					fences[f] = true
				}
			}
		}
		return true
	})
	return func() map[int64]bool {
		if _, err := server.Do("ECHO", end); err != nil {
			t.Fatal(err)
		}
		<-done
		return fences
	}
}

// churn is clients of two agents taking turns on one name until stopped.
type churn struct {
	local  int // clients 0..local-1 are the first agent's
	grants atomic.Int64
	done   chan struct{}
	wg     sync.WaitGroup
	mu     sync.Mutex
	held   []interval
}

// startChurn has local clients of a and remote ones of b take name in
// turn, each holding it up to 2ms, until stop.
func startChurn(t *testing.T, a, b *agenttest.Agent, name string, local, remote int) *churn {
	cr := &churn{local: local, done: make(chan struct{})}
	for i := range local + remote {
		agent := a
		if i >= local {
			agent = b
		}
		c := agenttest.Dial(t, agent.Config.Socket.Path)
		cr.wg.Add(1)
		go func() {
			defer cr.wg.Done()
			cr.turns(t, c, name, i)
		}()
	}
	return cr
}

// turns is client who's turns: LOCK, hold up to 2ms (or until LOST),
// UNLOCK, until the churn stops.
func (cr *churn) turns(t *testing.T, c *agenttest.Conn, name string, who int) {
	hold := time.Duration(who%3) * time.Millisecond
	for {
		select {
		case <-cr.done:
			return
		default:
		}
		_, ch := c.Send("LOCK " + name + " wait=2s")
		var r agenttest.Reply
		select {
		case r = <-ch:
		case <-time.After(10 * time.Second):
			t.Errorf("client %d: no answer to a LOCK in 10s", who)
			return
		}
		if r.Kind != "OK" {
			continue // BUSY, or NO_QUORUM while the masters settle
		}
		iv := interval{start: time.Now(), fence: r.Int("fence"), who: who}
		cr.grants.Add(1)
		select {
		case p := <-c.Pushes():
			if !strings.HasPrefix(p, "* LOST "+name) {
				t.Errorf("client %d: unexpected push %q", who, p)
			}
		case <-time.After(hold):
			iv.end = time.Now()
			_, unlocked := c.Send("UNLOCK " + name)
			<-unlocked // NOT_HELD if a LOST races it: the hold ended either way
		}
		if iv.end.IsZero() {
			iv.end = time.Now()
		}
		cr.mu.Lock()
		cr.held = append(cr.held, iv)
		cr.mu.Unlock()
	}
}

// awaitGrants waits until the churn has had n grants.
func (cr *churn) awaitGrants(t *testing.T, n int64) {
	t.Helper()
	var got int64
	lockagenttest.Eventually(t, 20*time.Second, func() bool { got = cr.grants.Load(); return got >= n },
		"only %d grants of %d in 20s", &got, n)
}

// awaitRemoteSince waits until a hold of the second agent's clients that
// began after since has ended.
func (cr *churn) awaitRemoteSince(t *testing.T, since time.Time) {
	t.Helper()
	lockagenttest.Eventually(t, 20*time.Second, func() bool {
		cr.mu.Lock()
		defer cr.mu.Unlock()
		return slices.ContainsFunc(cr.held, func(iv interval) bool { return iv.who >= cr.local && iv.start.After(since) })
	}, "no grant on the other agent in 20s")
}

// stop ends the churn and returns every hold, sorted by start.
func (cr *churn) stop() []interval {
	close(cr.done)
	cr.wg.Wait()
	sort.Slice(cr.held, func(i, j int) bool { return cr.held[i].start.Before(cr.held[j].start) })
	return cr.held
}
