package tests

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/agent"
	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/faultproxy"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// startHelper runs a real client process that sends "LOCK <lock> wait=10s"
// to the agent at path, and returns it once it holds.
func startHelper(t *testing.T, path, lock string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "LOCK_AGENT_HELPER_SOCKET="+path, "LOCK_AGENT_HELPER_NAME="+lock)
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, _ := bufio.NewReader(out).ReadString('\n')
	if !strings.HasPrefix(line, "locked 1 OK") {
		t.Fatalf("helper: %q", line)
	}
	return cmd
}

// awaitDelayed polls WHO NAME until it shows a delay, and returns its line.
// A tail stands for delay from its end on a majority; each WHO reads the
// masters at one moment between its send and its answer, so WHOs sent back
// to back, each answered within delay/2, read inside any window of delay at
// least once. When one took longer, the tail may have come and gone between
// two reads (a loaded host): awaitDelayed then says so and returns nil
// rather than judge the host's speed. Otherwise a tail no WHO showed within
// 5s fails the test.
func awaitDelayed(t *testing.T, c *agenttest.Conn, name string, delay time.Duration) map[string]string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	var slowest time.Duration
	for {
		sent := time.Now()
		r := c.Do("WHO " + name)
		slowest = max(slowest, time.Since(sent))
		for _, d := range r.Data {
			if d["delayed_until"] != "" {
				return d
			}
		}
		if time.Now().After(deadline) {
			if slowest >= delay/2 {
				t.Logf("no WHO showed delayed_until, and one took %v against a delay of %v: it may have ended between two of them", slowest, delay)
				return nil
			}
			t.Fatalf("WHO never showed delayed_until (each answered within %v, delay %v): %q %v", slowest, delay, r.Line, r.Data)
		}
	}
}

// expectDelay checks that name, whose hold ended at end with a delay,
// stays unavailable on other's agent for the delay: a wait=0 LOCK is BUSY
// and WHO shows delayed_until within it; a waiting LOCK is granted after it.
func expectDelay(t *testing.T, other *agenttest.Conn, name string, end time.Time, delay time.Duration) {
	t.Helper()
	until := end.Add(delay) // the earliest it can be
	if d := awaitDelayed(t, other, name, delay); d != nil {
		until = time.UnixMilli(agenttest.Reply{Fields: d}.Int("delayed_until"))
		if until.Before(end.Add(delay-50*time.Millisecond)) || until.After(time.Now().Add(delay+time.Second)) {
			t.Errorf("delayed_until %v, want about %v after the end %v", until, delay, end)
		}
	}
	// Granted is wrong only when the answer came before delayed_until: the
	// WHO rounds above may have taken the whole delay on a loaded host with
	// a master paused (a grant with a fresh fence was seen so, in a soak).
	if r := other.Do("LOCK " + name + " wait=0"); r.Kind != "BUSY" {
		if answered := time.Now(); r.Kind != "OK" || answered.Before(until) {
			t.Fatalf("LOCK wait=0 during the delay (answered %v before delayed_until %v): %q", until.Sub(answered), until, r.Line)
		}
		t.Logf("the delay had ended before LOCK wait=0 was answered (%v after delayed_until): %q", time.Since(until), r.Line)
		other.Do("UNLOCK " + name)
	}
	r := other.Do("LOCK " + name + " wait=10s")
	took := time.Since(end)
	if r.Kind != "OK" || took < delay || took > delay+2*time.Second {
		t.Fatalf("LOCK after the delay: %q %v after the end, want %v and a little", r.Line, took, delay)
	}
	t.Logf("%s granted on the other agent %v after the end, with delay=%v", name, took, delay)
}

func TestLockDelayAfterKill9OfTheHolder(t *testing.T) {
	a, b, _ := twoAgents(t, 3*time.Second)
	const delay = 800 * time.Millisecond
	cmd := startHelper(t, a.Config.Socket.Path, "tail/kill delay=800ms")
	other := agenttest.Dial(t, b.Config.Socket.Path)
	cmd.Process.Kill()
	end := time.Now()
	expectDelay(t, other, "tail/kill", end, delay)
}

func TestNoDelayAfterUnlock(t *testing.T) {
	a, b, _ := twoAgents(t, 3*time.Second)
	holder, other := agenttest.Dial(t, a.Config.Socket.Path), agenttest.Dial(t, b.Config.Socket.Path)
	if r := holder.Do("LOCK tail/clean delay=5m"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	if r := holder.Do("UNLOCK tail/clean"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	if r := other.Do("LOCK tail/clean wait=0"); r.Kind != "OK" {
		t.Fatalf("after a clean UNLOCK of a delay=5m hold: %q", r.Line)
	}
	if r := other.Do("WHO tail/clean"); len(r.Data) != 1 || r.Data[0]["delayed_until"] != "" {
		t.Fatalf("WHO after a clean UNLOCK: %v", r.Data)
	}
}

func TestConfiguredLockDelayAppliesToLocksWithoutDelay(t *testing.T) {
	servers := redistest.Start(t, 3)
	c1 := agenttest.Config(t, servers, 3*time.Second)
	c1.Lock.LockDelay = 700 * time.Millisecond
	a, b := agenttest.Start(t, c1), agenttest.Start(t, agenttest.Config(t, servers, 3*time.Second))
	holder, other := agenttest.Dial(t, a.Config.Socket.Path), agenttest.Dial(t, b.Config.Socket.Path)
	for _, l := range []string{"tail/default", "tail/none delay=0"} {
		if r := holder.Do("LOCK " + l); r.Kind != "OK" {
			t.Fatal(r.Line)
		}
	}
	holder.Close()
	end := time.Now()
	expectDelay(t, other, "tail/default", end, 700*time.Millisecond)
	if r := other.Do("LOCK tail/none wait=0"); r.Kind != "OK" {
		t.Fatalf("delay=0 overrides lock.lock_delay: %q", r.Line)
	}
}

// TestLockDelayAfterLost: the holder's agent loses its masters (its links
// are cut), tells its client LOST, and cannot end the hold; the record it
// left turns into a tail when its lease runs out, so the other agent is
// granted the name no sooner than the delay after the LOST.
func TestLockDelayAfterLost(t *testing.T) {
	servers := redistest.Start(t, 3)
	const lease, delay = time.Second, 700 * time.Millisecond
	cfg, links := proxiedConfig(t, servers, lease)
	a, b := agenttest.Start(t, cfg), agenttest.Start(t, agenttest.Config(t, servers, lease))
	holder, other := agenttest.Dial(t, a.Config.Socket.Path), agenttest.Dial(t, b.Config.Socket.Path)
	if r := holder.Do("LOCK tail/lost delay=700ms"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	// The hold's end as its agent counts it, at the latest: a validity
	// measured from before HOLDS was sent (a renewal after it only moves
	// the end later). The masters keep the record at least that long, and
	// the tail after it. (Measured from the test's receipt of the LOST, a
	// push that reached the test late on a loaded host made the delay look
	// short: 655ms.)
	sent := time.Now()
	h := holder.Do("HOLDS")
	if len(h.Data) != 1 {
		t.Fatalf("holds: %s", h.Line)
	}
	validity, _ := strconv.Atoi(h.Data[0]["validity"])
	end := sent.Add(time.Duration(validity) * time.Millisecond)
	for _, l := range links {
		l.SetMode(faultproxy.Cut)
	}
	_, granted := other.Send("LOCK tail/lost wait=10s")
	lost := holder.Push(5 * time.Second)
	if !strings.HasPrefix(lost, "* LOST tail/lost") {
		t.Fatalf("push %q, want LOST", lost)
	}
	r := other.Await(granted)
	if took := time.Since(end); r.Kind != "OK" || took < delay {
		t.Fatalf("the other agent got %q %v after the hold's end, want the delay %v at least", r.Line, took, delay)
	}
}

// TestADelayOnAMajorityIsWaitedOutAlone: a hold ends while its agent's
// link to one master is cut, so its end makes a tail of the delay on the
// other two, and the third keeps the live record for what is left of its
// lease. Another agent's waiter is granted the name once the tails run
// out (a majority free), not once the third master's lease does: a tail's
// expiry sends no message, so the waiter parks until the answers say a
// majority may be free (rules.FreeOnMajorityIn), not the longest wait.
func TestADelayOnAMajorityIsWaitedOutAlone(t *testing.T) {
	servers := redistest.Start(t, 3)
	const lease, delay = 6 * time.Second, 800 * time.Millisecond
	cfg, links := proxiedConfig(t, servers, lease)
	a, b := agenttest.Start(t, cfg), agenttest.Start(t, agenttest.Config(t, servers, lease))
	holder, other := agenttest.Dial(t, a.Config.Socket.Path), agenttest.Dial(t, b.Config.Socket.Path)
	if r := holder.Do("LOCK tail/maj delay=800ms"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	// The grant is answered once a majority has it: the third master's
	// record may land after (it had not, once, two tests at a time).
	records := func() int { return servers[2].Keys(cfg.Lock.KeyPrefix + "{tail/maj}:h:*") }
	if !pollFor(5*time.Second, 5*time.Millisecond, func() bool { return records() == 1 }) {
		t.Fatalf("the third master has %d records of the name after the grant, want 1", records())
	}
	links[2].SetMode(faultproxy.Cut)
	holder.Close() // an unclean end: the delay
	end := time.Now()
	expectDelay(t, other, "tail/maj", end, delay)
	if n := records(); n != 1 {
		t.Errorf("the third master has %d records of the name, want the live one it kept", n) // else the test showed nothing
	}
}

// proxiedConfig is an agent config whose links to servers go through
// proxies a test can cut.
func proxiedConfig(t *testing.T, servers []*redistest.Server, lease time.Duration) (cfg agent.Config, links []*faultproxy.Proxy) {
	cfg = agenttest.Config(t, servers, lease)
	cfg.AgentID = "proxied"
	for i, s := range servers {
		p, err := faultproxy.New(s.Addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		links = append(links, p)
		cfg.Masters[i].Address = p.Addr
	}
	return cfg, links
}

func TestMinHoldAcrossAgents(t *testing.T) {
	a, b, _ := twoAgents(t, 3*time.Second)
	holder, other := agenttest.Dial(t, a.Config.Socket.Path), agenttest.Dial(t, b.Config.Socket.Path)
	const minHold = 1200 * time.Millisecond
	asked := time.Now()
	if r := holder.Do("LOCK tail/min min_hold=1200ms"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	if r := holder.Do("UNLOCK tail/min"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	if r := other.Do("LOCK tail/min wait=0"); r.Kind != "BUSY" {
		t.Fatalf("LOCK wait=0 before min_hold ran out: %q", r.Line)
	}
	r := other.Do("LOCK tail/min wait=10s")
	took := time.Since(asked)
	if r.Kind != "OK" || took < minHold || took > minHold+2*time.Second {
		t.Fatalf("the other agent got %q %v after the grant was asked for, want min_hold %v and a little", r.Line, took, minHold)
	}
	// A hold kept past its min_hold ends at once.
	if r := holder.Do("LOCK tail/min2 min_hold=50ms"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	time.Sleep(100 * time.Millisecond) // what is waited for is min_hold's end itself
	holder.Do("UNLOCK tail/min2")
	if r := other.Do("LOCK tail/min2 wait=0"); r.Kind != "OK" {
		t.Fatalf("after min_hold ran out: %q", r.Line)
	}
}

// TestTailsAndRevokeWithAMasterPaused: with one master of three paused, a
// delay still holds on the two left (a majority), and REVOKE still works.
func TestTailsAndRevokeWithAMasterPaused(t *testing.T) {
	t.Parallel() // its own masters and agents; judges no latency
	a, b, servers := twoAgents(t, 3*time.Second)
	holder, other := agenttest.Dial(t, a.Config.Socket.Path), agenttest.Dial(t, b.Config.Socket.Path)
	if r := holder.Do("LOCK tail/paused delay=1s"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	servers[1].Pause()
	defer servers[1].Resume()
	// Until its probe doubts the paused master (a PING's deadline, 500ms
	// at least, after up to a ProbeInterval), a round waits for it, and
	// longer on a loaded host (see rules.Trusted): the first WHO below took
	// 710-770ms beside two CPU hogs, and one that took longer than the
	// delay read the tail after it had expired (a quiet CI run: "WHO never
	// showed delayed_until"). The tail is what this test checks: both
	// agents count the master out first.
	holder.AwaitMasters("down", 1)
	other.AwaitMasters("down", 1)
	cmd := startHelper(t, a.Config.Socket.Path, "tail/paused2 delay=700ms")
	cmd.Process.Kill()
	expectDelay(t, other, "tail/paused2", time.Now().Add(-time.Millisecond), 700*time.Millisecond)
	revoked := time.Now()
	if r := other.Do("REVOKE tail/paused"); r.Kind != "OK" || r.Int("n") != 1 {
		t.Fatalf("REVOKE with a master paused: %q", r.Line)
	}
	if p := holder.Push(time.Second); !strings.HasPrefix(p, "* LOST tail/paused ") {
		t.Fatalf("push %q", p)
	}
	expectDelay(t, other, "tail/paused", revoked, time.Second)
}

// TestAFailedMultiLockLeavesNoTail: the names a multi-lock won before it
// failed were never the client's: they go at once, min_hold or not.
func TestAFailedMultiLockLeavesNoTail(t *testing.T) {
	a, b, _ := twoAgents(t, 3*time.Second)
	client, other := agenttest.Dial(t, a.Config.Socket.Path), agenttest.Dial(t, b.Config.Socket.Path)
	if r := other.Do("LOCK tail/mb"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	if r := client.Do("LOCK tail/ma tail/mb min_hold=1h delay=1m wait=0"); r.Kind != "BUSY" {
		t.Fatalf("multi-lock: %q", r.Line)
	}
	if r := other.Do("LOCK tail/ma wait=2s"); r.Kind != "OK" {
		t.Fatalf("a name the failed multi-lock had won: %q", r.Line)
	}
}
