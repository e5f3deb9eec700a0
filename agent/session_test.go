package agent_test

import (
	"bufio"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/agent"
	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/agenttest"
)

// lineConn is a raw connection read line by line, for tests that pipeline
// several requests in one write and look at the order of the replies.
type lineConn struct {
	t  *testing.T
	nc net.Conn
	r  *bufio.Reader
}

func dialLines(t *testing.T, path string) *lineConn {
	nc, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &lineConn{t, nc, bufio.NewReader(nc)}
}

func (c *lineConn) write(lines ...string) {
	c.nc.Write([]byte(strings.Join(lines, "\n") + "\n"))
}

// next returns the next line that is not a push, waiting at most d.
func (c *lineConn) next(d time.Duration) string {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(d))
	for {
		line, err := c.r.ReadString('\n')
		if err != nil {
			c.t.Fatalf("no reply: %v", err)
		}
		if !strings.HasPrefix(line, "* ") {
			return strings.TrimSuffix(line, "\n")
		}
	}
}

// field returns key's value in a reply line.
func field(line, key string) string {
	for _, w := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(w, key+"="); ok {
			return v
		}
	}
	return ""
}

// TestPipelinedUnlockThenLockReleasesThenAcquires: UNLOCK x then LOCK x in
// one write take effect in that order: a release, then a new grant with a
// larger fence, never a re-entry of the hold being released.
func TestPipelinedUnlockThenLockReleasesThenAcquires(t *testing.T) {
	a, _ := start(t, nil)
	c := dialLines(t, a.Config.Socket.Path)
	c.write("l LOCK x")
	fence, _ := strconv.ParseInt(field(c.next(5*time.Second), "fence"), 10, 64)
	for i := range 200 {
		c.write("u UNLOCK x", "l LOCK x")
		replies := map[string]string{}
		for range 2 {
			line := c.next(5 * time.Second)
			replies[strings.Fields(line)[0]] = line
		}
		if u := replies["u"]; field(u, "count") != "0" {
			t.Fatalf("pair %d: UNLOCK answered %q", i, u)
		}
		l := replies["l"]
		next, _ := strconv.ParseInt(field(l, "fence"), 10, 64)
		if !strings.HasPrefix(l, "l OK") || field(l, "count") != "1" || next <= fence {
			t.Fatalf("pair %d: LOCK after UNLOCK answered %q (fence before %d): a re-entry, not a new grant", i, l, fence)
		}
		fence = next
	}
}

// TestPipelinedLocksJoinTheQueueInArrivalOrder: three LOCKs of different
// owners in one write are granted in the order of their lines, and while
// they wait, later lines (an UNLOCK of another owner) are still served.
func TestPipelinedLocksJoinTheQueueInArrivalOrder(t *testing.T) {
	a, _ := start(t, nil)
	holder := agenttest.Dial(t, a.Config.Socket.Path)
	if r := holder.Do("LOCK order"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	c := dialLines(t, a.Config.Socket.Path)
	c.write("m LOCK mine owner=m")
	if r := c.next(5 * time.Second); !strings.HasPrefix(r, "m OK") {
		t.Fatal(r)
	}
	c.write("a LOCK order owner=a wait=10s", "b LOCK order owner=b wait=10s", "c LOCK order owner=c wait=10s", "u UNLOCK mine owner=m")
	if r := c.next(5 * time.Second); !strings.HasPrefix(r, "u OK count=0") {
		t.Fatalf("the UNLOCK behind three waiting LOCKs: %q", r)
	}
	holder.AwaitWaiters(3)
	holder.Do("UNLOCK order")
	// Each grant is unlocked as it comes; the next grant may arrive before
	// the UNLOCK's reply, which is sent once the release landed.
	var granted []string
	for len(granted) < 3 {
		r := c.next(5 * time.Second)
		tag, kind := strings.Fields(r)[0], strings.Fields(r)[1]
		switch {
		case kind != "OK":
			t.Fatalf("unexpected reply %q", r)
		case len(tag) == 1:
			granted = append(granted, tag)
			c.write(fmt.Sprintf("u%s UNLOCK order owner=%s", tag, tag))
		}
	}
	if got := strings.Join(granted, ""); got != "abc" {
		t.Fatalf("granted in the order %s, want abc", got)
	}
}

// TestPipelinedReentriesAreCountedOnce: two LOCKs of one owner in one write
// are a grant and a re-entry, answered count=1 and count=2, each with the
// count its own request made.
func TestPipelinedReentriesAreCountedOnce(t *testing.T) {
	a, _ := start(t, nil)
	c := dialLines(t, a.Config.Socket.Path)
	for i := range 50 {
		c.write("a LOCK twice", "b LOCK twice")
		counts := map[string]string{}
		for range 2 {
			line := c.next(5 * time.Second)
			counts[strings.Fields(line)[0]] = field(line, "count")
		}
		if counts["a"] != "1" || counts["b"] != "2" {
			t.Fatalf("round %d: counts %v, want a=1 b=2", i, counts)
		}
		c.write("u UNLOCK twice", "v UNLOCK twice")
		c.next(5 * time.Second)
		c.next(5 * time.Second)
	}
}

func TestTTLBounds(t *testing.T) {
	a, _ := start(t, func(c *agent.Config) { c.Lock.MaxTTL = time.Minute })
	c := agenttest.Dial(t, a.Config.Socket.Path)
	if r := c.Do("LOCK held"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	tests := []struct {
		name, line, want string // want: "OK", or a text the BAD_REQUEST must contain
	}{
		{"a ttl under the minimum is refused, naming the minimum", "LOCK b1 ttl=3ms", "50ms"},
		{"a ttl of one nanosecond is refused", "LOCK b2 ttl=1ns", "50ms"},
		{"the minimum ttl is granted", "LOCK b3 ttl=50ms", "OK"},
		{"a ttl over lock.max_ttl is granted: it bounds nothing", "LOCK b4 ttl=61s", "OK"},
		{"the maximum ttl, 30 days, is granted", "LOCK b5 ttl=720h", "OK"},
		{"a ttl over 30 days is refused, naming the bound", "LOCK b6 ttl=721h", "720h"},
		{"EXTEND under the minimum is refused", "EXTEND held ttl=10ms", "50ms"},
		{"EXTEND over lock.max_ttl is done", "EXTEND held ttl=2m", "OK"},
		{"EXTEND over 30 days is refused, naming the bound", "EXTEND held ttl=721h", "720h"},
		{"EXTEND within the bounds is done", "EXTEND held ttl=30s", "OK"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := c.Do(tt.line)
			switch {
			case tt.want == "OK" && r.Kind != "OK":
				t.Fatalf("%q: %s", tt.line, r.Line)
			case tt.want != "OK" && (r.Code != "BAD_REQUEST" || !strings.Contains(r.Line, tt.want)):
				t.Fatalf("%q: %s (want BAD_REQUEST naming %s)", tt.line, r.Line, tt.want)
			}
		})
	}
	held := map[string]bool{}
	for _, d := range c.Do("HOLDS").Data {
		held[d["name"]] = true
	}
	for _, name := range []string{"b1", "b2", "b6"} {
		if held[name] {
			t.Fatalf("the refused LOCK %s left a hold: %v", name, held)
		}
	}
	if !held["b4"] || !held["b5"] || !held["held"] { // b3 (50ms) may have ended
		t.Fatalf("granted holds missing: %v", held)
	}
}

func TestSessionsPerUID(t *testing.T) {
	a, _ := start(t, func(c *agent.Config) { c.Limits.MaxSessionsPerUID = 2 })
	for a.Stats().Sessions > 0 { // the session start waited on may still be closing
		runtime.Gosched()
	}
	first := agenttest.Dial(t, a.Config.Socket.Path)
	first.Do("PING")
	agenttest.Dial(t, a.Config.Socket.Path).Do("PING")
	nc, err := net.Dial("unix", a.Config.Socket.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetReadDeadline(time.Now().Add(2 * time.Second))
	line, _ := bufio.NewReader(nc).ReadString('\n')
	if !strings.HasPrefix(line, "- ERR LIMIT") || !strings.Contains(line, "max_sessions_per_uid=2") {
		t.Fatalf("third session of one uid got %q", line)
	}
	first.Close()
	lockagenttest.Eventually(t, 2*time.Second, func() bool {
		c := agenttest.Dial(t, a.Config.Socket.Path)
		select {
		case <-c.Closed():
			return false
		case <-time.After(50 * time.Millisecond): // not refused at once
			return c.Do("PING").Kind == "OK"
		}
	}, "a closed session's place was not given back")
}

// TestLostComesBeforeNotHeld: an UNLOCK that races a hold's expiry and
// answers NOT_HELD must come after the hold's LOST on the connection, so
// that a client always knows why its hold is gone.
func TestLostComesBeforeNotHeld(t *testing.T) {
	a, _ := start(t, nil)
	conn, err := net.Dial("unix", a.Config.Socket.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	raced := 0
	for i := range 40 {
		name := "race" + strconv.Itoa(i)
		fmt.Fprintf(conn, "1 LOCK %s ttl=50ms\n", name)
		line, err := r.ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "1 OK ") {
			t.Fatalf("lock: %q %v", line, err)
		}
		// Around the LOST: validity (~48ms) less the 10ms lead, give or take.
		time.Sleep(time.Duration(34+i%10) * time.Millisecond)
		fmt.Fprintf(conn, "2 UNLOCK %s\n", name)
		lost := false
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(line, "* LOST "+name+" ") {
				lost = true
				continue
			}
			if strings.HasPrefix(line, "2 ") {
				if strings.Contains(line, "NOT_HELD") {
					raced++
					if !lost {
						t.Fatalf("NOT_HELD for %s before its LOST", name)
					}
				}
				break
			}
		}
	}
	t.Logf("%d of 40 UNLOCKs came after the expiry", raced)
}

// TestCancelPipelinedBehindAMultiLockEndsIt: a multi-lock claims its names
// in its own goroutine, one after the other; a CANCEL right behind it (in
// the same write) must end it whichever name it is claiming, or before it
// claimed any: it was lost, and the LOCK waited on.
func TestCancelPipelinedBehindAMultiLockEndsIt(t *testing.T) {
	a, _ := start(t, nil)
	holder := agenttest.Dial(t, a.Config.Socket.Path)
	if r := holder.Do("LOCK b"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	for i := range 20 {
		c := dialLines(t, a.Config.Socket.Path)
		c.write("1 LOCK a b wait=3s", "2 CANCEL 1")
		if r := c.next(5 * time.Second); r != "2 OK" {
			t.Fatalf("round %d: CANCEL answered %q", i, r)
		}
		if r := c.next(5 * time.Second); !strings.HasPrefix(r, "1 ERR CANCELLED") {
			t.Fatalf("round %d: the cancelled multi-lock answered %q", i, r)
		}
		c.nc.Close()
	}
	// Nothing it claimed is left held.
	if r := holder.Do("LOCK a wait=2s"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
}
