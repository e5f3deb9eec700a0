package tests

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/hostcpu"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// TestMasterFaults pauses masters with SIGSTOP (the process is alive, its
// socket open, nothing answers: the hardest failure to detect).
func TestMasterFaults(t *testing.T) {
	a, b, servers := twoAgents(t, time.Second)
	timeout := a.Config.Lock.MasterTimeout
	holder := agenttest.Dial(t, a.Config.Socket.Path)
	other := agenttest.Dial(t, b.Config.Socket.Path)

	// One of three down: locking still works, and a held lock stays held.
	if r := holder.Do("LOCK kept"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	servers[0].Pause()
	for i := range 20 {
		if r := other.Do("LOCK one-down wait=1s"); r.Kind != "OK" {
			t.Fatalf("lock %d with one master paused: %s", i, r.Line)
		}
		if r := other.Do("UNLOCK one-down"); r.Kind != "OK" {
			t.Fatal(r.Line)
		}
	}
	time.Sleep(1500 * time.Millisecond) // past a lease: renewals must have kept it
	if p := holder.Push(0); p != "" {
		t.Fatalf("lost a lock with a majority up: %s", p)
	}
	if r := other.Do("LOCK kept wait=0"); r.Kind != "BUSY" {
		t.Fatalf("another agent got a renewed lock: %s", r.Line)
	}

	// Two of three down: LOCK wait=0 answers NO_QUORUM fast, and the hold
	// is LOST before its validity runs out.
	// On a host short of CPU a round does not count a master's silence
	// while tasks wait for a CPU (rules.Trusted): it waits until the probe
	// doubts the master, as it would for one starved of CPU, but never
	// past a grant's budget, a quarter lease.
	servers[1].Pause()
	busy := hostWaited()
	start := time.Now()
	r := other.Do("LOCK two-down wait=0")
	if took, excused := time.Since(start), min(hostWaited()-busy, b.Config.Lock.Lease/4); r.Code != "NO_QUORUM" || took > 6*timeout+excused {
		t.Fatalf("with two masters paused: %q after %v (master_timeout %v; the host's tasks waited %v for a CPU meanwhile)", r.Line, took, timeout, excused)
	}
	// The hold's validity as the agent reports it until the LOST comes (a
	// renewal answered just before the pause may still move it on once).
	var validUntil time.Time
	var p string
	for deadline := time.Now().Add(3 * time.Second); p == "" && time.Now().Before(deadline); {
		if h := holder.Do("HOLDS"); h.Int("n") == 1 {
			// validity= is cut to whole ms: the hold is valid up to 1ms longer.
			validUntil = time.Now().Add(time.Duration(agenttest.Reply{Fields: h.Data[0]}.Int("validity")+1) * time.Millisecond)
		}
		p = holder.Push(10 * time.Millisecond)
	}
	lostAt := time.Now()
	if !strings.HasPrefix(p, "* LOST kept owner= fence=") || !strings.HasSuffix(p, "reason=quorum") {
		t.Fatalf("push %q", p)
	}
	// The watchdog declares the hold lost a lead (max(10ms, lease/50))
	// before its validity ends, and the name is released only after that:
	// that order is the promise, and the hostile and breaker tests check
	// it against another agent's grant. When the LOST reaches this test is
	// up to the host: beside two CPU hogs it came 68ms after the validity.
	// What must not happen is a watchdog that never gets to it.
	t.Logf("LOST came %v before the hold's validity ended", validUntil.Sub(lostAt))
	if lease := a.Config.Lock.Lease; lostAt.After(validUntil.Add(lease)) {
		t.Fatalf("LOST came %v after the hold's validity ended (lease %v)", lostAt.Sub(validUntil), lease)
	}
	if r := holder.Do("HOLDS"); r.Int("n") != 0 {
		t.Fatalf("lost hold still listed: %+v", r.Data)
	}

	// Masters back: service recovers without restarting anything.
	servers[0].Resume()
	servers[1].Resume()
	for _, c := range []*agenttest.Conn{other, holder} {
		var r agenttest.Reply
		lockagenttest.Eventually(t, 5*time.Second, func() bool { r = c.Do("LOCK recovered wait=2s"); return r.Kind == "OK" },
			"no recovery after resume: %s", &r.Line)
		c.Do("UNLOCK recovered")
	}
	if r := other.Do("LOCK kept wait=2s"); r.Kind != "OK" {
		t.Fatalf("the lost lock is not free: %s", r.Line)
	}
	holder.AwaitMasters("up", 3) // the next probes bring the resumed masters back
}

// TestAgentStartsWithMastersDown: an agent whose masters are unreachable
// starts, shows the masters down, answers NO_QUORUM when a LOCK's wait ends
// (at once for wait=0), and serves once they come up.
func TestAgentStartsWithMastersDown(t *testing.T) {
	a, _, servers := twoAgents(t, time.Second)
	for _, s := range servers {
		s.Pause()
	}
	c := agenttest.Dial(t, a.Config.Socket.Path)
	c.AwaitMasters("down", 3)
	noQuorumAfterTheWait(t, c, "x")
	for _, s := range servers {
		s.Resume()
	}
	lockagenttest.Eventually(t, 5*time.Second, func() bool { return c.Do("LOCK x wait=1s").Kind == "OK" }, "never recovered")
}

// TestAgentStartsWithNoMasterReachable: an agent whose masters do not exist
// yet starts anyway, shows them down, answers NO_QUORUM when a LOCK's wait
// ends instead of hanging, and serves as soon as they come up, without a restart.
func TestAgentStartsWithNoMasterReachable(t *testing.T) {
	servers := redistest.Reserve(t, 3)
	// Masters met empty sit out one lease first: the agent cannot tell a
	// new master from one that lost its data.
	cfg := agenttest.Config(t, servers, time.Second)
	a := agenttest.StartNoWait(t, cfg)
	c := agenttest.Dial(t, a.Config.Socket.Path)
	st := c.Do("STATUS")
	for _, d := range st.Data {
		if d["state"] != "down" {
			t.Fatalf("master %s is %s with nothing listening", d["master"], d["state"])
		}
	}
	noQuorumAfterTheWait(t, c, "boot")
	for _, s := range servers {
		s.Launch()
	}
	var r agenttest.Reply
	lockagenttest.Eventually(t, 10*time.Second, func() bool { r = c.Do("LOCK boot wait=1s"); return r.Kind == "OK" },
		"never served after the masters came up: %s", &r.Line)
}

// TestAHungMasterCostsNothing pauses one master of three (SIGSTOP: its
// socket open, nothing answering): UNLOCK must not wait for it, nor a new
// waiter's subscription, so releases and handoffs across agents stay fast.
func TestAHungMasterCostsNothing(t *testing.T) {
	a, b, servers := twoAgents(t, 15*time.Second)
	holder := agenttest.Dial(t, a.Config.Socket.Path)
	waiter := agenttest.Dial(t, b.Config.Socket.Path)
	servers[0].Pause()
	var unlocks, handoffs []time.Duration
	for i := range 15 {
		name := "hung" + strconv.Itoa(i) // a new name each time: every wait subscribes anew
		if r := holder.Do("LOCK " + name); r.Kind != "OK" {
			t.Fatal(r.Line)
		}
		_, ch := waiter.Send("LOCK " + name + " wait=10s")
		waiter.AwaitWaiters(1)
		// The waiter tried and parked. Not awaitSubscribed: an UNLOCK
		// just after the subscriptions are confirmed, while the recheck
		// they cause is in flight, left the waiter BUSY at wait=10s once
		// in 150 hand-overs (a lost wake-up, reported to the lead).
		time.Sleep(20 * time.Millisecond)
		start := time.Now()
		if r := holder.Do("UNLOCK " + name); r.Kind != "OK" {
			t.Fatal(r.Line)
		}
		unlocks = append(unlocks, time.Since(start))
		if r := waiter.Await(ch); r.Kind != "OK" {
			t.Fatal(r.Line)
		}
		handoffs = append(handoffs, time.Since(start))
		waiter.Do("UNLOCK " + name)
	}
	p50 := func(d []time.Duration) time.Duration {
		slices.Sort(d)
		return d[len(d)/2]
	}
	// A round that waits for the hung master waits one of its timeouts
	// at least (master_timeout, 50 ms; the probe doubts the master by
	// then, so no more): a median under half of one, and a hand-over's
	// under three quarters, waited for no one. (It was 10 and 20 ms: a
	// soak run beside two CPU hogs took 10.6 and 16.8 ms; with releases
	// made to wait for every master, 51.5 and 51.5 ms.)
	timeout := a.Config.Lock.MasterTimeout
	t.Logf("one master hung: UNLOCK p50 %v, handoff p50 %v (master_timeout %v)", p50(unlocks), p50(handoffs), timeout)
	if p50(unlocks) > timeout/2 || p50(handoffs) > timeout*3/4 {
		t.Fatalf("one master hung: UNLOCK p50 %v (want <= %v), handoff p50 %v (want <= %v)", p50(unlocks), timeout/2, p50(handoffs), timeout*3/4)
	}
}

// TestUnsafeAndQuarantinedMastersAreShown: an operator sees, in `lock-agent
// status` and its JSON, which master is unsafe and why, and how long a
// master that lost its data sits out; the agent still serves with the other two.
func TestUnsafeAndQuarantinedMastersAreShown(t *testing.T) {
	t.Parallel() // see TestMain
	servers := redistest.Start(t, 3)
	// A master that lost its data sits out one lease: 20s outlasts the
	// unsafe check's 5 s period.
	cfg := agenttest.Config(t, servers, 20*time.Second)
	a := agenttest.Start(t, cfg)
	sock := a.Config.Socket.Path
	if _, err := servers[0].Do("CONFIG", "SET", "maxmemory-policy", "allkeys-lru"); err != nil {
		t.Fatal(err)
	}
	servers[1].Restart()
	c := agenttest.Dial(t, sock)
	c.AwaitMasters("quarantined", 1)
	c.AwaitMastersWithin(15*time.Second, "unsafe", 1) // checked every 5 s
	code, out, _ := lockAgent(t, "status", "-socket", sock)
	if code != 3 || !strings.Contains(out, "unsafe") || !strings.Contains(out, "maxmemory_policy:allkeys-lru") ||
		!strings.Contains(out, "votes again in") || !strings.Contains(out, "it lost its data") || !strings.Contains(out, "never lock-agent bootstrap") {
		t.Fatalf("status: exit %d\n%s", code, out)
	}
	code, out, _ = lockAgent(t, "status", "-socket", sock, "-json")
	var st struct {
		Masters []struct {
			State, Reason    string
			QuarantineLeftMS int64 `json:"quarantine_left_ms"`
		}
	}
	if code != 3 || json.Unmarshal([]byte(out), &st) != nil || st.Masters[0].Reason == "" || st.Masters[1].QuarantineLeftMS <= 0 {
		t.Fatalf("status -json: exit %d\n%s", code, out)
	}
	servers[0].Do("CONFIG", "SET", "maxmemory-policy", "noeviction")
	// Safe again at the next check, up to 5 s later (AwaitMasters' 5 s
	// missed it now and then).
	c.AwaitMastersWithin(15*time.Second, "up", 2)
	if r := c.Do("LOCK still-served wait=2s"); r.Kind != "OK" {
		t.Fatalf("two safe masters are a quorum: %s", r.Line)
	}
}

// noQuorumAfterTheWait checks, with no master reachable, that LOCK wait=0
// answers NO_QUORUM at once and LOCK wait=300ms when its wait is over.
func noQuorumAfterTheWait(t *testing.T, c *agenttest.Conn, name string) {
	t.Helper()
	start := time.Now()
	if r := c.Do("LOCK " + name + " wait=0"); r.Code != "NO_QUORUM" || time.Since(start) > 100*time.Millisecond {
		t.Fatalf("wait=0: got %q after %v", r.Line, time.Since(start))
	}
	start = time.Now()
	r := c.Do("LOCK " + name + " wait=300ms")
	if took := time.Since(start); r.Code != "NO_QUORUM" || took < 300*time.Millisecond || took > time.Second {
		t.Fatalf("wait=300ms: got %q after %v", r.Line, took)
	}
}

// TestAWaitingLockOutlastsAnOutage: a LOCK that may wait keeps trying while
// a majority of masters is away, and is granted when they come back within
// its wait; wait=forever included.
func TestAWaitingLockOutlastsAnOutage(t *testing.T) {
	t.Parallel() // see TestMain
	for _, wait := range []string{"wait=10s", "wait=forever"} {
		t.Run(wait, func(t *testing.T) {
			a, _, servers := twoAgents(t, time.Second)
			c := agenttest.Dial(t, a.Config.Socket.Path)
			servers[0].Pause()
			servers[1].Pause()
			_, ch := c.Send("LOCK outage " + wait)
			select {
			case r := <-ch:
				t.Fatalf("answered while the majority was away: %s", r.Line)
			case <-time.After(500 * time.Millisecond):
			}
			servers[0].Resume()
			servers[1].Resume()
			if r := c.Await(ch); r.Kind != "OK" {
				t.Fatalf("after the masters came back: %s", r.Line)
			}
		})
	}
}

// hostWaited is the host's total time with a task waiting for a CPU (see
// quorum.Config.HostWaited); 0 where the kernel cannot say.
func hostWaited() time.Duration {
	d, _ := hostcpu.Waited()
	return d
}
