package tests

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/agent"
	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// twoAgents starts two agents (two "hosts") over the same three masters.
func twoAgents(t *testing.T, lease time.Duration) (*agenttest.Agent, *agenttest.Agent, []*redistest.Server) {
	return twoAgentsOver(t, 3, lease)
}

// twoAgentsOver starts two agents over the same n masters.
func twoAgentsOver(t *testing.T, n int, lease time.Duration) (*agenttest.Agent, *agenttest.Agent, []*redistest.Server) {
	return twoAgentsWith(t, n, lease, 0)
}

// twoCachingAgents is twoAgents with lock.cache_linger = linger on both.
func twoCachingAgents(t *testing.T, lease, linger time.Duration) (*agenttest.Agent, *agenttest.Agent, []*redistest.Server) {
	if linger <= 0 {
		t.Fatalf("twoCachingAgents needs a linger, got %v", linger)
	}
	return twoAgentsWith(t, 3, lease, linger)
}

// twoAgentsWith starts two agents over the same n masters, with
// lock.cache_linger = linger if it is not 0 (else the default).
func twoAgentsWith(t *testing.T, n int, lease, linger time.Duration) (*agenttest.Agent, *agenttest.Agent, []*redistest.Server) {
	return twoAgentsSet(t, n, lease, func(l *agent.LockConfig) {
		if linger != 0 {
			l.CacheLinger = linger
		}
	})
}

// twoAgentsSet starts two agents over the same n masters, each with its
// lock settings changed by set.
func twoAgentsSet(t *testing.T, n int, lease time.Duration, set func(*agent.LockConfig)) (*agenttest.Agent, *agenttest.Agent, []*redistest.Server) {
	servers := redistest.Start(t, n)
	c1 := agenttest.Config(t, servers, lease)
	c1.AgentID = "host-a"
	c2 := agenttest.Config(t, servers, lease)
	c2.AgentID = "host-b"
	set(&c1.Lock)
	set(&c2.Lock)
	a, b := agenttest.Start(t, c1), agenttest.Start(t, c2)
	t.Cleanup(func() { // runs before the agents stop: a failed test must not leave them facing paused masters
		for _, s := range servers {
			s.Resume()
		}
	})
	return a, b, servers
}

type interval struct {
	start, end time.Time
	fence      int64
	who        int
}

// TestMutualExclusionAndFencing runs 10 clients over two agents on one name
// for several seconds. Hold intervals, on this process's monotonic clock,
// must never overlap, and fences must strictly increase in grant order.
func TestMutualExclusionAndFencing(t *testing.T) {
	a, b, _ := twoAgents(t, 3*time.Second)
	const clients = 10
	deadline := time.Now().Add(4 * time.Second)
	var mu sync.Mutex
	var held []interval
	var slowest time.Duration
	var wg sync.WaitGroup
	for i := range clients {
		agent := a
		if i%2 == 1 {
			agent = b
		}
		c := agenttest.Dial(t, agent.Config.Socket.Path)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				asked := time.Now()
				r := c.Do("LOCK mutex wait=5s")
				waited := time.Since(asked)
				if r.Kind != "OK" {
					t.Errorf("client %d: %s", i, r.Line)
					return
				}
				iv := interval{start: time.Now(), fence: r.Int("fence"), who: i}
				time.Sleep(time.Millisecond)
				iv.end = time.Now()
				if u := c.Do("UNLOCK mutex"); u.Kind != "OK" {
					t.Errorf("client %d unlock: %s", i, u.Line)
					return
				}
				mu.Lock()
				held = append(held, iv)
				slowest = max(slowest, waited)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	sort.Slice(held, func(i, j int) bool { return held[i].start.Before(held[j].start) })
	perClient := map[int]int{}
	for i, iv := range held {
		perClient[iv.who]++
		if i == 0 {
			continue
		}
		prev := held[i-1]
		if iv.start.Before(prev.end) {
			t.Fatalf("overlap: client %d held [%v, %v] and client %d from %v", prev.who, prev.start, prev.end, iv.who, iv.start)
		}
		if iv.fence <= prev.fence {
			t.Fatalf("fence %d after %d in grant order", iv.fence, prev.fence)
		}
	}
	if len(held) < 100 || len(perClient) != clients {
		t.Fatalf("only %d grants over %d clients", len(held), len(perClient))
	}
	// A wait near the 3s lease means a key was orphaned (granted with no
	// holder to release it) and had to expire.
	if slowest > 1500*time.Millisecond {
		t.Fatalf("a LOCK waited %v: an orphaned key blocked the name", slowest)
	}
	t.Logf("%d exclusive grants over %d clients on 2 agents; slowest wait %v", len(held), clients, slowest)
}

// TestWaiterOnAnotherAgentWakesOnRelease: the release message, not polling,
// wakes a waiter on another host within a few milliseconds.
func TestWaiterOnAnotherAgentWakesOnRelease(t *testing.T) {
	a, b, _ := twoAgents(t, 15*time.Second)
	holder := agenttest.Dial(t, a.Config.Socket.Path)
	waiter := agenttest.Dial(t, b.Config.Socket.Path)
	var worst time.Duration
	for range 10 {
		holder.Do("LOCK wake")
		_, ch := waiter.Send("LOCK wake wait=10s")
		waiter.AwaitWaiters(1)
		start := time.Now()
		holder.Do("UNLOCK wake")
		r := waiter.Await(ch)
		took := time.Since(start)
		if r.Kind != "OK" {
			t.Fatal(r.Line)
		}
		worst = max(worst, took)
		waiter.Do("UNLOCK wake")
	}
	// The fallback timer is the holder's remaining lease (15s): anything
	// near it would be polling, not the release message. The bound is far
	// from both: a busy 2-core host took 50ms once, and speed is measured
	// by BenchmarkCompare (wake-up p99), not here.
	if worst > time.Second {
		t.Fatalf("slowest wake-up %v", worst)
	}
	t.Logf("slowest of 10 cross-agent wake-ups (unlock sent to grant received): %v", worst)
}

// TestKilledClientReleasesAtOnce kills -9 a client process that holds a lock:
// the agent sees the socket close and the next waiter gets it at once, not
// when the lease (15s) would have run out: within a second. (Within 100ms,
// as on a quiet host, judged the host: a CI run on a slow machine took
// 137ms.)
func TestKilledClientReleasesAtOnce(t *testing.T) {
	a, b, _ := twoAgents(t, 15*time.Second)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "LOCK_AGENT_HELPER_SOCKET="+a.Config.Socket.Path, "LOCK_AGENT_HELPER_NAME=crash")
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, _ := bufio.NewReader(out).ReadString('\n')
	if !strings.HasPrefix(line, "locked 1 OK") {
		t.Fatalf("helper: %q", line)
	}
	waiter := agenttest.Dial(t, b.Config.Socket.Path)
	_, ch := waiter.Send("LOCK crash wait=10s")
	waiter.AwaitWaiters(1)
	start := time.Now()
	cmd.Process.Kill()
	r := waiter.Await(ch)
	took := time.Since(start)
	cmd.Wait()
	if r.Kind != "OK" || took > time.Second {
		t.Fatalf("waiter got %q %v after kill -9", r.Line, took)
	}
	t.Logf("next waiter on another agent got the lock %v after kill -9 of the holder", took)
}

// TestWatchdogKeepsAShortLeaseExclusive: with a 1s lease, a hold kept for 5s
// is renewed all along and nobody else gets it.
func TestWatchdogKeepsAShortLeaseExclusive(t *testing.T) {
	t.Parallel()
	a, b, _ := twoAgents(t, time.Second)
	holder := agenttest.Dial(t, a.Config.Socket.Path)
	first := holder.Do("LOCK dog")
	if first.Kind != "OK" || first.Int("validity") > 1000 {
		t.Fatalf("lock: %s", first.Line)
	}
	other := agenttest.Dial(t, b.Config.Socket.Path)
	end := time.Now().Add(5 * time.Second)
	for time.Now().Before(end) {
		// BUSY, or NO_QUORUM when a busy host keeps the masters' answers
		// past master_timeout: not granted either way.
		if r := other.Do("LOCK dog wait=200ms"); r.Kind == "OK" {
			// Whether the holder was told LOST first says which of the
			// two failed: the renewals on this host (a liveness failure,
			// the holder told before the grant), or exclusion (seen twice
			// in CI runs on a slow machine, without this to tell).
			p := holder.Push(2 * time.Second)
			var told string
			if p != "" {
				told = fmt.Sprintf("; the holder was told %q %v before that grant was read", p, r.At-holder.Arrived(p))
			}
			t.Fatalf("another agent got a watched lock: %s%s", r.Line, told)
		}
	}
	if p := holder.Push(0); p != "" {
		t.Fatalf("holder got %s", p)
	}
	if r := holder.Do("HOLDS"); r.Int("n") != 1 || r.Data[0]["validity"] <= "0" {
		t.Fatalf("holds: %+v", r)
	}
}

// TestTTLHoldExpiresWithLost: a ttl= hold is not renewed; it ends with a LOST
// push before anyone else can get it, and then someone else can.
func TestTTLHoldExpiresWithLost(t *testing.T) {
	a, b, _ := twoAgents(t, 3*time.Second)
	holder := agenttest.Dial(t, a.Config.Socket.Path)
	r := holder.Do("LOCK ttl ttl=500ms")
	if r.Kind != "OK" || r.Int("validity") > 500 {
		t.Fatalf("lock: %s", r.Line)
	}
	granted := time.Now()
	other := agenttest.Dial(t, b.Config.Socket.Path)
	_, ch := other.Send("LOCK ttl wait=5s")
	other.AwaitWaiters(1)
	p := holder.Push(2 * time.Second)
	lostAt := time.Now()
	if !strings.HasPrefix(p, "* LOST ttl owner= fence="+r.Fields["fence"]+" reason=expired") {
		t.Fatalf("push %q", p)
	}
	got := other.Await(ch)
	if got.Kind != "OK" || got.Int("fence") <= r.Int("fence") {
		t.Fatalf("next holder: %s", got.Line)
	}
	if lost := lostAt.Sub(granted); lost < 400*time.Millisecond || lost > 600*time.Millisecond {
		t.Fatalf("LOST came %v after a 500ms grant", lost)
	}
	if h := holder.Do("HOLDS"); h.Int("n") != 0 {
		t.Fatalf("expired hold still listed: %+v", h.Data)
	}
}

// TestAParkedWaiterWakesAtOnce: a waiter parked a while (its subscriptions
// confirmed) is granted within milliseconds of the release. A confirmation
// that woke it into a failed attempt used to count as a failed wake-up, so
// the real release then waited out a back-off (about 8 ms at p50).
func TestAParkedWaiterWakesAtOnce(t *testing.T) {
	a, b, _ := twoAgents(t, 15*time.Second)
	holder := agenttest.Dial(t, a.Config.Socket.Path)
	waiter := agenttest.Dial(t, b.Config.Socket.Path)
	var took []time.Duration
	for range 10 {
		holder.Do("LOCK parked")
		_, ch := waiter.Send("LOCK parked wait=10s")
		waiter.AwaitWaiters(1)
		time.Sleep(20 * time.Millisecond) // the scenario: parked a while, its subscriptions confirmed
		start := time.Now()
		holder.Do("UNLOCK parked")
		if r := waiter.Await(ch); r.Kind != "OK" {
			t.Fatal(r.Line)
		}
		took = append(took, time.Since(start))
		waiter.Do("UNLOCK parked")
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	t.Logf("wake-ups after a 20 ms park: median %v, slowest %v", took[len(took)/2], took[len(took)-1])
	// The release message wakes it (a few ms on a quiet host: the figure
	// above); a waiter that missed it would wake only at its fallback, the
	// holder's remaining lease (15s). A bound in ms would judge the host's
	// speed, not the wake-up.
	if took[len(took)/2] > 250*time.Millisecond {
		t.Fatalf("median wake-up %v after a 20 ms park: the release message did not wake it", took[len(took)/2])
	}
}
