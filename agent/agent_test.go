package agent_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/agent"
	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

func start(t *testing.T, mutate func(*agent.Config)) (*agenttest.Agent, []*redistest.Server) {
	servers := redistest.Start(t, 3)
	cfg := agenttest.Config(t, servers, 3*time.Second)
	if mutate != nil {
		mutate(&cfg)
	}
	return agenttest.Start(t, cfg), servers
}

func TestBadInputGetsItsCodeAndTheConnectionStaysUsable(t *testing.T) {
	a, _ := start(t, nil)
	c := agenttest.Dial(t, a.Config.Socket.Path)
	tests := []struct {
		name, line, code string
	}{
		{"a bad tag", "a/b PING", "BAD_REQUEST"},
		{"a verb nobody knows", "1 FROB", "UNKNOWN_VERB"},
		{"a name with a bad character", "1 LOCK a{b}", "BAD_NAME"},
		{"a name over 200 bytes", "1 LOCK " + strings.Repeat("n", 201), "BAD_NAME"},
		{"an unknown option", "1 LOCK a color=red", "BAD_REQUEST"},
		{"an option given twice", "1 LOCK a wait=1 wait=2", "BAD_REQUEST"},
		{"a bad duration", "1 LOCK a wait=soon", "BAD_REQUEST"},
		{"a bad owner", "1 LOCK a owner=x/y", "BAD_REQUEST"},
		{"shared mode with a limit", "1 LOCK a mode=shared limit=3", "BAD_REQUEST"},
		{"a semaphore of more than 4096 slots", "1 LOCK a limit=4097", "BAD_REQUEST"},
		{"a downgrade of something else than exclusive", "1 UNLOCK a mode=shared", "BAD_REQUEST"},
		{"a multi-lock naming a name twice", "1 LOCK a b a", "BAD_REQUEST"},
		{"UNLOCK of a name not held", "1 UNLOCK a", "NOT_HELD"},
		{"EXTEND of a name not held", "1 EXTEND a ttl=1s", "NOT_HELD"},
		{"EXTEND without ttl", "1 EXTEND a", "BAD_REQUEST"},
		{"HELLO of another protocol", "1 HELLO proto=9", "BAD_REQUEST"},
		{"PING with an argument", "1 PING x", "BAD_REQUEST"},
		{"a verb alone with no tag", "LOCK", "BAD_REQUEST"},
		{"a line of invalid UTF-8", "1 LOCK \xff\xfe", "BAD_NAME"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c.Raw(tt.line + "\n")
			c.Raw("ping1 PING\n")
			// The bad line's reply comes first: it is answered before the PING is read.
			r := c.Do("PING")
			if r.Kind != "OK" {
				t.Fatalf("connection unusable after %q: %s", tt.line, r.Line)
			}
		})
	}
	// Check the codes with tags we route (the raw ones above used fixed tags).
	for _, tt := range tests {
		line := tt.line
		if i := strings.IndexByte(line, ' '); i >= 0 && !strings.HasPrefix(line, "a/b") && line != "LOCK" {
			line = line[i+1:]
			if r := c.Do(line); r.Kind != "ERR" || r.Code != tt.code {
				t.Errorf("%s: %q got %q, want ERR %s", tt.name, line, r.Line, tt.code)
			}
		}
	}
}

func TestALineOverTheLimitIsRefusedAndTheConnectionClosed(t *testing.T) {
	a, _ := start(t, nil)
	nc, err := net.Dial("unix", a.Config.Socket.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.Write([]byte("1 LOCK a\n"))
	nc.Write([]byte("2 LOCK " + strings.Repeat("x", 5000) + "\n"))
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	var got strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := nc.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			break
		}
	}
	out := got.String()
	if !strings.Contains(out, "- ERR BAD_REQUEST line too long") || !strings.Contains(out, "* BYE reason=protocol") {
		t.Fatalf("got %q", out)
	}
	// Its hold was released with the connection.
	c := agenttest.Dial(t, a.Config.Socket.Path)
	if r := c.Do("LOCK a wait=2s"); r.Kind != "OK" {
		t.Fatalf("the closed session's hold leaked: %s", r.Line)
	}
}

func TestReentryCountsAndOwnersContend(t *testing.T) {
	a, _ := start(t, nil)
	c := agenttest.Dial(t, a.Config.Socket.Path)
	first := c.Do("LOCK r")
	if first.Kind != "OK" || first.Int("count") != 1 || first.Int("fence") < 1 || first.Int("validity") < 2000 {
		t.Fatalf("first lock: %s", first.Line)
	}
	again := c.Do("LOCK r wait=0")
	if again.Int("count") != 2 || again.Int("fence") != first.Int("fence") {
		t.Fatalf("re-entry: %s (fence must stay %d)", again.Line, first.Int("fence"))
	}
	if r := c.Do("LOCK r owner=other wait=0"); r.Kind != "BUSY" {
		t.Fatalf("another owner in the same session: %s", r.Line)
	}
	if r := c.Do("UNLOCK r owner=other"); r.Code != "NOT_HELD" {
		t.Fatalf("unlock by a non-holder: %s", r.Line)
	}
	if r := c.Do("HOLDS"); r.Int("n") != 1 || r.Data[0]["count"] != "2" || r.Data[0]["mode"] != "exclusive" {
		t.Fatalf("the non-holder's UNLOCK changed something: %+v", r)
	}
	if r := c.Do("UNLOCK r"); r.Int("count") != 1 {
		t.Fatalf("first unlock: %s", r.Line)
	}
	if r := c.Do("LOCK r owner=other wait=0"); r.Kind != "BUSY" {
		t.Fatalf("still held once: %s", r.Line)
	}
	if r := c.Do("UNLOCK r"); r.Int("count") != 0 {
		t.Fatalf("last unlock: %s", r.Line)
	}
	r := c.Do("LOCK r owner=other wait=0")
	if r.Kind != "OK" || r.Int("fence") <= first.Int("fence") {
		t.Fatalf("after release: %s (fence must pass %d)", r.Line, first.Int("fence"))
	}
}

func TestCancelEndsAWaitAndLeavesNothingHeld(t *testing.T) {
	a, _ := start(t, nil)
	holder := agenttest.Dial(t, a.Config.Socket.Path)
	holder.Do("LOCK c")
	c := agenttest.Dial(t, a.Config.Socket.Path)
	tag, ch := c.Send("LOCK c wait=30s")
	c.AwaitWaiters(1)
	if r := c.Do("PING"); r.Kind != "OK" {
		t.Fatal("a waiting LOCK held up PING")
	}
	if r := c.Do("CANCEL " + tag); r.Kind != "OK" {
		t.Fatalf("cancel: %s", r.Line)
	}
	if r := c.Await(ch); r.Code != "CANCELLED" {
		t.Fatalf("cancelled lock: %s", r.Line)
	}
	if r := c.Do("HOLDS"); r.Int("n") != 0 {
		t.Fatalf("holds after cancel: %+v", r.Data)
	}
	if r := c.Do("STATUS"); r.Int("waiters") != 0 {
		t.Fatalf("waiter leaked: %s", r.Line)
	}
}

func TestClosingTheConnectionReleasesAtOnce(t *testing.T) {
	a, _ := start(t, nil)
	holder := agenttest.Dial(t, a.Config.Socket.Path)
	holder.Do("LOCK x")
	c := agenttest.Dial(t, a.Config.Socket.Path)
	_, ch := c.Send("LOCK x wait=10s")
	c.AwaitWaiters(1)
	start := time.Now()
	holder.Close()
	r := c.Await(ch)
	if took := time.Since(start); r.Kind != "OK" || took > 100*time.Millisecond {
		t.Fatalf("waiter got %s %v after the holder closed", r.Line, took)
	}
}

func TestLimits(t *testing.T) {
	a, _ := start(t, func(c *agent.Config) {
		c.Limits.MaxHoldsPerSession = 2
		c.Limits.MaxSessions = 2 // the harness's readiness check used one and closed it
	})
	c := agenttest.Dial(t, a.Config.Socket.Path)
	c.Do("LOCK l1")
	c.Do("LOCK l2")
	if r := c.Do("LOCK l3"); r.Code != "LIMIT" {
		t.Fatalf("third hold: %s", r.Line)
	}
	if r := c.Do("LOCK l1"); r.Int("count") != 2 {
		t.Fatalf("re-entry is not a new hold: %s", r.Line)
	}
	agenttest.Dial(t, a.Config.Socket.Path).Do("PING")
	nc, err := net.Dial("unix", a.Config.Socket.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	buf := make([]byte, 200)
	nc.SetReadDeadline(time.Now().Add(2 * time.Second))
	n, _ := nc.Read(buf)
	if !strings.HasPrefix(string(buf[:n]), "- ERR LIMIT") {
		t.Fatalf("third session got %q", buf[:n])
	}
}

func TestWhoRecordsThePeerCredentials(t *testing.T) {
	a, _ := start(t, nil)
	c := agenttest.Dial(t, a.Config.Socket.Path)
	l := c.Do("LOCK who owner=me")
	r := c.Do("WHO who")
	if r.Int("n") != 1 {
		t.Fatalf("who: %+v", r)
	}
	d := r.Data[0]
	if d["agent"] != "test" || d["pid"] != strconv.Itoa(os.Getpid()) || d["uid"] != strconv.Itoa(os.Getuid()) ||
		d["owner"] != "me" || d["mode"] != "exclusive" || d["fence"] != l.Fields["fence"] || d["since"] == "" {
		t.Fatalf("who data %+v", d)
	}
}

func TestExtendSetsTheTTL(t *testing.T) {
	a, _ := start(t, nil)
	c := agenttest.Dial(t, a.Config.Socket.Path)
	c.Do("LOCK e ttl=300ms")
	r := c.Do("EXTEND e ttl=2s")
	if r.Kind != "OK" || r.Int("validity") < 1500 {
		t.Fatalf("extend: %s", r.Line)
	}
	if p := c.Push(500 * time.Millisecond); p != "" {
		t.Fatalf("lost after extend: %s", p)
	}
}

// TestShutdownAnswersWaitingLocks: a LOCK waiting when the agent stops is
// answered ERR SHUTTING_DOWN before the BYE, not left without an answer;
// so is one waiting for its turn behind it (see agent/server/order.go).
func TestShutdownAnswersWaitingLocks(t *testing.T) {
	a, _ := start(t, nil)
	holder := agenttest.Dial(t, a.Config.Socket.Path)
	holder.Do("LOCK w")
	c := agenttest.Dial(t, a.Config.Socket.Path)
	_, single := c.Send("LOCK w wait=30s")
	_, multi := c.Send("LOCK w w2 wait=30s owner=m")
	_, behind := c.Send("LOCK w wait=30s")
	c.AwaitWaiters(2)
	a.Stop()
	for i, ch := range []<-chan agenttest.Reply{single, multi, behind} {
		if r := c.Await(ch); r.Kind != "ERR" || r.Code != "SHUTTING_DOWN" {
			t.Fatalf("waiting LOCK %d, when the agent stopped: %q", i, r.Line)
		}
	}
	if p := c.Push(time.Second); p != "* BYE reason=shutdown" {
		t.Fatalf("push %q, want the BYE", p)
	}
}

// TestMultiLocksSentWhileTheAgentStops: multi-locks keep coming while the
// agent stops and waits for the ones it ended to answer: the agent neither
// crashes nor hangs (the wait is ended once, however many multi-locks come
// and go after it began).
func TestMultiLocksSentWhileTheAgentStops(t *testing.T) {
	a, _ := start(t, nil)
	holder := agenttest.Dial(t, a.Config.Socket.Path)
	holder.Do("LOCK m")
	c := agenttest.Dial(t, a.Config.Socket.Path)
	c.Send("LOCK m m2 wait=30s")
	c.AwaitWaiters(1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-c.Closed():
				return
			default:
			}
			c.Send("LOCK m m3 wait=30s")
			c.Send("LOCK m m4 wait=0")
		}
	}()
	a.Stop()
	<-done
}

func TestShutdownPushesLostAndByeAndReleases(t *testing.T) {
	a, servers := start(t, nil)
	c := agenttest.Dial(t, a.Config.Socket.Path)
	c.Do("LOCK s1")
	c.Do("LOCK s2 owner=o")
	a.Stop()
	var pushes []string
	for p := c.Push(time.Second); p != ""; p = c.Push(100 * time.Millisecond) {
		pushes = append(pushes, p)
	}
	got := strings.Join(pushes, "\n")
	if !strings.Contains(got, "* LOST s1 owner= fence=") || !strings.Contains(got, "* LOST s2 owner=o") ||
		!strings.Contains(got, "reason=shutdown") || !strings.HasSuffix(got, "* BYE reason=shutdown") {
		t.Fatalf("pushes:\n%s", got)
	}
	for _, s := range servers {
		if n := s.Keys("lock-agent:{s*}:h:*"); n != 0 {
			t.Fatalf("%d holder keys left on %s", n, s.Addr)
		}
	}
	if _, err := os.Stat(a.Config.Socket.Path); !os.IsNotExist(err) {
		t.Fatalf("socket left behind: %v", err)
	}
}

func TestSocketPathSafety(t *testing.T) {
	servers := redistest.Start(t, 1)
	run := func(cfg agent.Config) error {
		a, err := agent.New(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		return a.Run(ctx)
	}
	t.Run("a regular file is never replaced", func(t *testing.T) {
		cfg := agenttest.Config(t, servers, time.Second)
		os.WriteFile(cfg.Socket.Path, []byte("precious"), 0o600)
		if err := run(cfg); err == nil || !strings.Contains(err.Error(), "not a socket") {
			t.Fatalf("err = %v", err)
		}
		if b, _ := os.ReadFile(cfg.Socket.Path); string(b) != "precious" {
			t.Fatal("file was touched")
		}
	})
	t.Run("a symlink is never followed or replaced", func(t *testing.T) {
		cfg := agenttest.Config(t, servers, time.Second)
		target := filepath.Join(filepath.Dir(cfg.Socket.Path), "target")
		os.WriteFile(target, nil, 0o600)
		os.Symlink(target, cfg.Socket.Path)
		if err := run(cfg); err == nil {
			t.Fatal("started over a symlink")
		}
		if fi, err := os.Lstat(cfg.Socket.Path); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Fatal("symlink was replaced")
		}
	})
	t.Run("a stale socket is replaced", func(t *testing.T) {
		cfg := agenttest.Config(t, servers, time.Second)
		ln, _ := net.ListenUnix("unix", &net.UnixAddr{Name: cfg.Socket.Path, Net: "unix"})
		ln.SetUnlinkOnClose(false)
		ln.Close()
		if err := run(cfg); err != nil {
			t.Fatalf("stale socket not replaced: %v", err)
		}
	})
	t.Run("a live socket means another agent", func(t *testing.T) {
		cfg := agenttest.Config(t, servers, time.Second)
		ln, _ := net.Listen("unix", cfg.Socket.Path)
		defer ln.Close()
		if err := run(cfg); err == nil || !strings.Contains(err.Error(), "in use") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("the socket gets the configured mode", func(t *testing.T) {
		cfg := agenttest.Config(t, servers, time.Second)
		cfg.Socket.Mode = 0o660
		a := agenttest.Start(t, cfg)
		fi, err := os.Stat(a.Config.Socket.Path)
		if err != nil || fi.Mode().Perm() != 0o660 || fi.Mode()&os.ModeSocket == 0 {
			t.Fatalf("socket mode %v %v", fi.Mode(), err)
		}
	})
}

// TestAShortTTLLastsUnderALongLease: with the production 15s lease, a 300ms
// ttl hold is kept its whole validity and another session stays out.
func TestAShortTTLLastsUnderALongLease(t *testing.T) {
	servers := redistest.Start(t, 3)
	a := agenttest.Start(t, agenttest.Config(t, servers, 15*time.Second))
	c := agenttest.Dial(t, a.Config.Socket.Path)
	other := agenttest.Dial(t, a.Config.Socket.Path)
	if r := c.Do("LOCK short ttl=300ms owner=x"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	if r := other.Do("LOCK short wait=0 owner=x"); r.Kind != "BUSY" {
		t.Fatalf("another session got a held ttl lock: %s", r.Line)
	}
	if p := c.Push(200 * time.Millisecond); p != "" {
		t.Fatalf("lost early: %s", p)
	}
	if p := c.Push(time.Second); !strings.HasSuffix(p, "reason=expired") {
		t.Fatalf("push %q", p)
	}
}

// TestLocalWaitersAreServedInArrivalOrder queues five waiters on one agent
// behind a holder on the same name: each gets it in the order it asked.
func TestLocalWaitersAreServedInArrivalOrder(t *testing.T) {
	a, _ := start(t, nil)
	holder := agenttest.Dial(t, a.Config.Socket.Path)
	holder.Do("LOCK fifo")
	type grant struct {
		who int
		ch  <-chan agenttest.Reply
		c   *agenttest.Conn
	}
	var waiting []grant
	for i := range 5 {
		c := agenttest.Dial(t, a.Config.Socket.Path)
		_, ch := c.Send("LOCK fifo wait=10s")
		waiting = append(waiting, grant{i, ch, c})
		holder.AwaitWaiters(int64(i + 1)) // queued before the next one asks
	}
	holder.Do("UNLOCK fifo")
	for _, g := range waiting {
		r := g.c.Await(g.ch)
		if r.Kind != "OK" {
			t.Fatalf("waiter %d: %s", g.who, r.Line)
		}
		for _, later := range waiting[g.who+1:] {
			select {
			case r := <-later.ch:
				t.Fatalf("waiter %d was granted before waiter %d released: %s", later.who, g.who, r.Line)
			default:
			}
		}
		g.c.Do("UNLOCK fifo")
	}
}

// TestLocalWaitersShareOneContender parks 20 waiters for one name on an
// agent while another agent holds it: the masters see a couple of acquire
// attempts, not one or more per waiter.
func TestLocalWaitersShareOneContender(t *testing.T) {
	a, servers := start(t, nil)
	other := agenttest.Config(t, servers, 3*time.Second)
	other.AgentID = "other"
	holderAgent := agenttest.Start(t, other)
	agenttest.Dial(t, holderAgent.Config.Socket.Path).Do("LOCK crowd")
	evals := func() int {
		total := 0
		for _, s := range servers {
			total += evalCalls(t, s)
		}
		return total
	}
	before := evals()
	for range 20 {
		agenttest.Dial(t, a.Config.Socket.Path).Send("LOCK crowd wait=10s")
	}
	agenttest.Dial(t, a.Config.Socket.Path).AwaitWaiters(20)
	time.Sleep(300 * time.Millisecond) // the window in which attempts are counted
	// Health probes of both agents also run scripts: up to 30 in all here,
	// on a loaded host. One attempt per waiter would add 60.
	if n := evals() - before; n > 45 {
		t.Fatalf("%d scripts ran on the masters for 20 parked waiters", n)
	} else {
		t.Logf("%d scripts ran on 3 masters in 300ms with 20 parked waiters (probes included)", n)
	}
}

// evalCalls counts EVALSHA and EVAL calls a master has served.
func evalCalls(t *testing.T, s *redistest.Server) int {
	info, err := s.Info("commandstats")
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, line := range strings.Split(info, "\n") {
		if strings.HasPrefix(line, "cmdstat_evalsha:") || strings.HasPrefix(line, "cmdstat_eval:") {
			for _, kv := range strings.Split(strings.SplitN(line, ":", 2)[1], ",") {
				if v, ok := strings.CutPrefix(kv, "calls="); ok {
					n, _ := strconv.Atoi(strings.TrimSpace(v))
					total += n
				}
			}
		}
	}
	return total
}

func TestWaiterLimit(t *testing.T) {
	a, _ := start(t, func(c *agent.Config) { c.Limits.MaxWaiters = 1 })
	agenttest.Dial(t, a.Config.Socket.Path).Do("LOCK crowded")
	first := agenttest.Dial(t, a.Config.Socket.Path)
	_, waiting := first.Send("LOCK crowded wait=10s")
	c := agenttest.Dial(t, a.Config.Socket.Path)
	c.AwaitWaiters(1)
	if r := c.Do("LOCK crowded wait=10s"); r.Code != "LIMIT" {
		t.Fatalf("second waiter: %s", r.Line)
	}
	first.Raw("c CANCEL 1\n")
	if r := first.Await(waiting); r.Code != "CANCELLED" {
		t.Fatalf("first waiter: %s", r.Line)
	}
	if n := c.Do("STATUS").Int("waiters"); n != 0 {
		t.Fatalf("waiters after cancel: %d", n)
	}
}

func TestQuitReleasesTheSessionsHolds(t *testing.T) {
	a, _ := start(t, nil)
	c := agenttest.Dial(t, a.Config.Socket.Path)
	c.Do("LOCK q1")
	if r := c.Do("QUIT"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	select {
	case <-c.Closed():
	case <-time.After(2 * time.Second):
		t.Fatal("QUIT did not close the connection")
	}
	if r := agenttest.Dial(t, a.Config.Socket.Path).Do("LOCK q1 wait=0"); r.Kind != "OK" {
		t.Fatalf("hold survived QUIT: %s", r.Line)
	}
}

// TestPipelinedRequestsAreAllServed pipelines 50,000 requests while reading:
// the agent slows the client down rather than dropping it or a reply.
func TestPipelinedRequestsAreAllServed(t *testing.T) {
	a, _ := start(t, nil)
	nc, err := net.Dial("unix", a.Config.Socket.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	const n = 50000
	go nc.Write([]byte(strings.Repeat("p PING\n", n)))
	nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	r := bufio.NewReader(nc)
	for i := range n {
		line, err := r.ReadString('\n')
		if err != nil || line != "p OK\n" {
			t.Fatalf("reply %d: %q %v", i, line, err)
		}
	}
}

// TestAClientThatStopsReadingStallsOnlyItself floods the agent without
// reading: its requests are throttled, everyone else is served as usual,
// and once it goes away its hold is released at once.
// stopReading plays a client that sends but reads nothing: it pipelines
// PINGs until the agent, whose answers fill the socket and its queue, stops
// reading them.
func stopReading(t *testing.T, nc net.Conn) {
	t.Helper()
	batch := []byte(strings.Repeat("p PING\n", 10000))
	for blocked := false; !blocked; {
		nc.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
		_, err := nc.Write(batch)
		blocked = errors.Is(err, os.ErrDeadlineExceeded)
		if err != nil && !blocked {
			t.Fatalf("write: %v", err)
		}
	}
}

func TestAClientThatStopsReadingStallsOnlyItself(t *testing.T) {
	a, _ := start(t, nil)
	nc, err := net.Dial("unix", a.Config.Socket.Path)
	if err != nil {
		t.Fatal(err)
	}
	nc.Write([]byte("1 LOCK greedy\n"))
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if line, err := bufio.NewReader(nc).ReadString('\n'); err != nil || !strings.HasPrefix(line, "1 OK") {
		t.Fatalf("greedy lock: %q %v", line, err)
	}
	stopReading(t, nc)
	other := agenttest.Dial(t, a.Config.Socket.Path)
	for i := range 20 {
		if r := other.Do(fmt.Sprintf("LOCK other%d wait=1s", i)); r.Kind != "OK" {
			t.Fatalf("another client was held up: %s", r.Line)
		}
	}
	if r := other.Do("LOCK greedy wait=0"); r.Kind != "BUSY" {
		t.Fatalf("the stalled client's hold: %s", r.Line)
	}
	nc.Close()
	if r := other.Do("LOCK greedy wait=3s"); r.Kind != "OK" {
		t.Fatalf("the stalled client's hold was not released when it went away: %s", r.Line)
	}
}

// TestAClientThatStopsReadingDoesNotHoldUpItsNamesContender: a LOCK of one
// name is answered by the name's contender itself (no goroutine waits for
// it), so the answer must never wait for a client that stopped reading: the
// next reader behind it on the same name is still granted.
func TestAClientThatStopsReadingDoesNotHoldUpItsNamesContender(t *testing.T) {
	a, _ := start(t, nil)
	writer := agenttest.Dial(t, a.Config.Socket.Path)
	if r := writer.Do("LOCK shared-name"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	stalled, err := net.Dial("unix", a.Config.Socket.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	stalled.Write([]byte("1 LOCK shared-name mode=shared\n"))
	writer.AwaitWaiters(1)
	stopReading(t, stalled)
	reader := agenttest.Dial(t, a.Config.Socket.Path)
	_, granted := reader.Send("LOCK shared-name mode=shared wait=5s")
	writer.AwaitWaiters(2)
	if r := writer.Do("UNLOCK shared-name"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	if r := reader.Await(granted); r.Kind != "OK" {
		t.Fatalf("the reader behind a stalled client: %s", r.Line)
	}
}

// TestAClientThatStopsReadingCannotQueueAnswersWithoutBound: the answer of
// a wait never waits for the client (see session.reply), so the agent stops
// reading a client whose queue is full instead: a client that reads nothing
// and sends LOCK ... wait=0 again and again (each BUSY at once behind a local
// waiter, its tag free again) leaves at most outQueue lines and the answers
// of its waits (max_holds_per_session) queued.
func TestAClientThatStopsReadingCannotQueueAnswersWithoutBound(t *testing.T) {
	const maxHolds = 10
	a, _ := start(t, func(c *agent.Config) { c.Limits.MaxHoldsPerSession = maxHolds })
	holder := agenttest.Dial(t, a.Config.Socket.Path)
	if r := holder.Do("LOCK x"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	waiter := agenttest.Dial(t, a.Config.Socket.Path)
	waiter.Send("LOCK x wait=forever")
	holder.AwaitWaiters(1)
	flood, err := net.Dial("unix", a.Config.Socket.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer flood.Close()
	bound := agent.OutQueue + maxHolds
	batch := []byte(strings.Repeat("t LOCK x wait=0\n", 1000))
	most := 0
	for range 3 * bound / 1000 {
		flood.SetWriteDeadline(time.Now().Add(300 * time.Millisecond))
		if _, err := flood.Write(batch); err != nil {
			break // the agent stopped reading
		}
		most = max(most, agent.QueuedLines(a.Agent))
	}
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		most = max(most, agent.QueuedLines(a.Agent))
	}
	if most > bound {
		t.Fatalf("%d lines queued for a client that reads nothing, more than outQueue and its waits (%d)", most, bound)
	}
}
