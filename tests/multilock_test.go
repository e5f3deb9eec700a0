package tests

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// TestMultiLockAllOrNothing: a multi-lock is granted whole, with fences and
// counts in the order the names were given; one that cannot get a name
// leaves every name as it was; UNLOCK of several names is all or nothing.
func TestMultiLockAllOrNothing(t *testing.T) {
	a, b, _ := twoAgents(t, 3*time.Second)
	c := agenttest.Dial(t, a.Config.Socket.Path)
	other := agenttest.Dial(t, b.Config.Socket.Path)

	pre := c.Do("LOCK m/b") // re-entered by the multi-lock below
	r := c.Do("LOCK m/c m/a m/b wait=2s")
	fences, counts := strings.Split(r.Fields["fence"], ","), strings.Split(r.Fields["count"], ",")
	if r.Kind != "OK" || len(fences) != 3 || strings.Join(counts, ",") != "1,1,2" || fences[2] != pre.Fields["fence"] || r.Int("validity") <= 0 {
		t.Fatalf("multi-lock: %s (m/b held before with fence %s)", r.Line, pre.Fields["fence"])
	}
	if h := c.Do("HOLDS"); h.Int("n") != 3 {
		t.Fatalf("holds after the multi-lock: %+v", h.Data)
	}
	if u := c.Do("UNLOCK m/a m/x"); u.Code != "NOT_HELD" {
		t.Fatalf("UNLOCK of a held and an unheld name: %s", u.Line)
	}
	if h := c.Do("HOLDS"); h.Int("n") != 3 {
		t.Fatalf("a refused UNLOCK released something: %+v", h.Data)
	}
	if u := c.Do("UNLOCK m/a m/b m/c"); u.Fields["count"] != "0,1,0" {
		t.Fatalf("UNLOCK of three: %s", u.Line)
	}

	// The other agent holds m/z: a multi-lock of m/a, m/z, m/y gets m/a
	// (and perhaps m/y) first, waits, and gives back everything.
	if r := other.Do("LOCK m/z"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	start := time.Now()
	if r := c.Do("LOCK m/a m/z m/y wait=300ms"); r.Kind != "BUSY" || time.Since(start) > 2*time.Second {
		t.Fatalf("a multi-lock with one name held elsewhere: %s after %v", r.Line, time.Since(start))
	}
	if h := c.Do("HOLDS"); h.Int("n") != 1 || h.Data[0]["name"] != "m/b" || h.Data[0]["count"] != "1" {
		t.Fatalf("after the BUSY multi-lock: %+v (only m/b, count 1, must remain)", h.Data)
	}
	for _, name := range []string{"m/a", "m/y"} {
		if r := other.Do("LOCK " + name + " wait=0"); r.Kind != "OK" {
			t.Fatalf("%s was left held by a failed multi-lock: %s", name, r.Line)
		}
	}
}

// TestMultiLocksInOppositeOrdersNeverDeadlock: LOCK p q on one agent and
// LOCK q p on another, 200 times each at once: no deadlock (every LOCK is
// answered well within its wait) and no overlap of either name.
func TestMultiLocksInOppositeOrdersNeverDeadlock(t *testing.T) {
	a, b, _ := twoAgents(t, 3*time.Second)
	type span struct{ start, end time.Time }
	var mu sync.Mutex
	var spans []span
	var wg sync.WaitGroup
	for i, line := range []string{"LOCK d/p d/q wait=10s", "LOCK d/q d/p wait=10s"} {
		agent := a
		if i == 1 {
			agent = b
		}
		c := agenttest.Dial(t, agent.Config.Socket.Path)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range 200 {
				asked := time.Now()
				r := c.Do(line)
				if r.Kind != "OK" || time.Since(asked) > 5*time.Second {
					t.Errorf("%q round %d: %s after %v", line, n, r.Line, time.Since(asked))
					return
				}
				s := span{start: time.Now()}
				time.Sleep(time.Millisecond)
				s.end = time.Now()
				if u := c.Do("UNLOCK d/p d/q"); u.Kind != "OK" {
					t.Errorf("unlock: %s", u.Line)
					return
				}
				mu.Lock()
				spans = append(spans, s)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(spans) != 400 {
		t.Fatalf("%d of 400 multi-locks", len(spans))
	}
	for i, x := range spans {
		for _, y := range spans[i+1:] {
			if x.start.Before(y.end) && y.start.Before(x.end) {
				t.Fatal("two multi-locks of p and q held at once")
			}
		}
	}
}

// TestMultiLockWithTTL: the names of a multi-lock with ttl= are won on the
// watchdog's lease, then all set to the ttl: each ends with its own LOST
// expired at the ttl, and another agent then gets them. A name the
// multi-lock re-entered keeps its watchdog hold.
func TestMultiLockWithTTL(t *testing.T) {
	a, b, _ := twoAgents(t, 3*time.Second)
	c := agenttest.Dial(t, a.Config.Socket.Path)
	other := agenttest.Dial(t, b.Config.Socket.Path)
	if r := c.Do("LOCK t/kept"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	r := c.Do("LOCK t/b t/a t/kept ttl=600ms")
	if r.Kind != "OK" || r.Int("validity") > 600 || r.Fields["count"] != "1,1,2" {
		t.Fatalf("multi-lock with ttl: %s", r.Line)
	}
	granted := time.Now()
	lost := map[string]bool{}
	for range 2 {
		p := c.Push(2 * time.Second)
		f := strings.Fields(p)
		if len(f) < 3 || f[1] != "LOST" || !strings.Contains(p, "reason=expired") {
			t.Fatalf("push %q", p)
		}
		lost[f[2]] = true
	}
	if d := time.Since(granted); !lost["t/a"] || !lost["t/b"] || d < 450*time.Millisecond || d > 800*time.Millisecond {
		t.Fatalf("lost %v %v after a 600ms grant", lost, d)
	}
	if h := c.Do("HOLDS"); h.Int("n") != 1 || h.Data[0]["name"] != "t/kept" {
		t.Fatalf("after the ttl: %+v, want only t/kept", h.Data)
	}
	if r := other.Do("LOCK t/a t/b wait=1s"); r.Kind != "OK" {
		t.Fatalf("the expired names elsewhere: %s", r.Line)
	}
	if r := other.Do("LOCK t/kept wait=0"); r.Kind != "BUSY" {
		t.Fatalf("the re-entered name was given up: %s", r.Line)
	}
}

// TestShortTTLsUnderALongLease: with the default 15s watchdog lease, a
// multi-lock with ttl=100ms and an EXTEND down to 100ms keep their holds
// until the ttl (a 15s lease's 300ms LOST lead used to lose them at once).
// The extended watchdog hold then lapses, as documented: it is renewed
// every lease/3.
func TestShortTTLsUnderALongLease(t *testing.T) {
	a := agenttest.Start(t, agenttest.Config(t, redistest.Start(t, 3), 15*time.Second))
	c := agenttest.Dial(t, a.Config.Socket.Path)
	if r := c.Do("LOCK s/a s/b ttl=100ms"); r.Kind != "OK" || r.Int("validity") > 100 {
		t.Fatalf("multi-lock ttl=100ms: %s", r.Line)
	}
	if r := c.Do("LOCK s/c"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	if r := c.Do("EXTEND s/c ttl=100ms"); r.Kind != "OK" || r.Int("validity") > 100 {
		t.Fatalf("EXTEND to 100ms: %s", r.Line)
	}
	if h := c.Do("HOLDS"); h.Int("n") != 3 {
		t.Fatalf("holds right after: %+v", h.Data)
	}
	start := time.Now()
	for range 3 {
		if p := c.Push(time.Second); !strings.HasPrefix(p, "* LOST s/") || time.Since(start) < 50*time.Millisecond {
			t.Fatalf("push %q after %v", p, time.Since(start))
		}
	}
}
