// Package agenttest runs real agents over real redis-servers for tests, and
// speaks the wire protocol to them with a small line client.
package agenttest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/lock-agent/lock-agent/agent"
	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/history"
	"github.com/lock-agent/lock-agent/internal/redistest"
	"github.com/lock-agent/lock-agent/quorum"
)

// Agent is a running agent.
type Agent struct {
	*agent.Agent
	Config agent.Config
	stop   func()
}

// Config returns a test configuration over servers: a socket in a fresh
// temporary directory, short timeouts, and the given lease. It bootstraps
// the servers (see quorum.Bootstrap) as the new masters they are, so they
// need not sit out a quarantine: build configs before a test empties a
// master, or the emptied master is taken for a new one.
func Config(t testing.TB, servers []*redistest.Server, lease time.Duration) agent.Config {
	t.Helper()
	cfg := ConfigNoBootstrap(t, servers, lease)
	if _, err := quorum.Bootstrap(context.Background(), cfg.Lock.KeyPrefix, cfg.Masters); err != nil {
		// Masters that want credentials or TLS the test sets later:
		// the test calls Bootstrap once it has.
		t.Logf("agenttest: bootstrap: %v", err)
	}
	return cfg
}

// Bootstrap bootstraps cfg's masters as new ones, with their credentials.
func Bootstrap(t testing.TB, cfg agent.Config) {
	t.Helper()
	if _, err := quorum.Bootstrap(context.Background(), cfg.Lock.KeyPrefix, cfg.Masters); err != nil {
		t.Fatal(err)
	}
}

// ConfigNoBootstrap is Config for masters that must be met as they are, as
// a new agent meets them.
func ConfigNoBootstrap(t testing.TB, servers []*redistest.Server, lease time.Duration) agent.Config {
	cfg := agent.Default()
	cfg.AgentID = "test"
	dir, err := os.MkdirTemp("", "la")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	cfg.Socket.Path = filepath.Join(dir, "agent.sock")
	cfg.Lock.Lease = lease
	cfg.Lock.RetryMin, cfg.Lock.RetryMax = 5*time.Millisecond, 50*time.Millisecond
	for i, s := range servers {
		cfg.Masters = append(cfg.Masters, quorum.MasterConfig{Name: fmt.Sprintf("m%d", i), Address: s.Addr})
	}
	return cfg
}

// Start runs an agent with cfg until the test ends (or Stop), and waits
// until it listens and all of its masters are up: up to 20s, the time a
// start takes on a busy host, not what the agent promises. (Within 5s, a
// CI run on a slow machine failed two Redis Cluster tests at their
// agent's start, "never 3 masters up": each cluster master's first
// probes, of three clusters beside another test's, timed out.)
func Start(t testing.TB, cfg agent.Config) *Agent {
	t.Helper()
	a := StartNoWait(t, cfg)
	c := Dial(t, cfg.Socket.Path)
	defer c.Close()
	c.AwaitMastersWithin(20*time.Second, "up", len(cfg.Masters))
	return a
}

// StartNoWait runs an agent with cfg until the test ends (or Stop), and
// waits only until it listens: its masters may be down.
func StartNoWait(t testing.TB, cfg agent.Config) *Agent {
	t.Helper()
	level := hclog.Off
	if os.Getenv("LOCK_AGENT_TEST_LOG") != "" {
		level = hclog.Debug
	}
	a, err := agent.New(cfg, hclog.New(&hclog.LoggerOptions{Name: cfg.AgentID, Level: level}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	h := &Agent{Agent: a, Config: cfg}
	h.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("agent: %v", err)
			}
		})
	}
	t.Cleanup(h.stop)
	select {
	case <-a.Ready():
	case err := <-done:
		t.Fatalf("agent did not start: %v", err)
	}
	return h
}

// Stop stops the agent gracefully and waits for it.
func (a *Agent) Stop() { a.stop() }

// Reply is one final reply with the DATA lines before it.
type Reply struct {
	Kind   string // OK, BUSY, ERR
	Code   string // for ERR
	Fields map[string]string
	Data   []map[string]string
	Line   string
	// At is when the reply was read from the socket (history.Stamp), in
	// line order with the pushes' (see Arrived).
	At time.Duration
}

// Int returns a numeric field, or -1.
func (r Reply) Int(key string) int64 {
	n, err := strconv.ParseInt(r.Fields[key], 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// Conn is a protocol connection with replies routed by tag.
type Conn struct {
	t      testing.TB
	conn   net.Conn
	mu     sync.Mutex
	wmu    sync.Mutex
	next   int
	wait   map[string]chan Reply
	data   map[string][]map[string]string
	pushes chan string
	// arrived is when each push not yet asked for by Arrived was read
	// from the socket (history.Stamp), under mu.
	arrived map[string]time.Duration
	closed  chan struct{}
}

// Dial connects to an agent's socket.
func Dial(t testing.TB, path string) *Conn {
	t.Helper()
	nc, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	return NewConn(t, nc)
}

// NewConn speaks the protocol over a connection made elsewhere (by another
// process, as another user). It is closed when the test ends.
func NewConn(t testing.TB, nc net.Conn) *Conn {
	c := &Conn{t: t, conn: nc, wait: map[string]chan Reply{}, data: map[string][]map[string]string{},
		pushes: make(chan string, 1000), arrived: map[string]time.Duration{}, closed: make(chan struct{})}
	go c.read()
	t.Cleanup(c.Close)
	return c
}

// Close closes the connection.
func (c *Conn) Close() { c.conn.Close() }

// Closed is closed when the agent closed the connection.
func (c *Conn) Closed() <-chan struct{} { return c.closed }

func (c *Conn) read() {
	defer close(c.closed)
	r := bufio.NewReader(c.conn)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimRight(line, "\n")
		if strings.HasPrefix(line, "* ") {
			c.mu.Lock()
			if _, ok := c.arrived[line]; !ok {
				c.arrived[line] = history.Stamp()
			}
			c.mu.Unlock()
			c.pushes <- line
			continue
		}
		words := strings.Fields(line)
		if len(words) < 2 {
			continue
		}
		tag, kind := words[0], words[1]
		fields := map[string]string{}
		for _, w := range words[2:] {
			if k, v, ok := strings.Cut(w, "="); ok {
				fields[k] = v
			}
		}
		c.mu.Lock()
		if kind == "DATA" {
			c.data[tag] = append(c.data[tag], fields)
			c.mu.Unlock()
			continue
		}
		rep := Reply{Kind: kind, Fields: fields, Data: c.data[tag], Line: line, At: history.Stamp()}
		if kind == "ERR" && len(words) > 2 {
			rep.Code = words[2]
		}
		delete(c.data, tag)
		ch := c.wait[tag]
		delete(c.wait, tag)
		c.mu.Unlock()
		if ch != nil {
			ch <- rep
		}
	}
}

// Send writes "TAG line" with a fresh tag and returns where its reply comes.
func (c *Conn) Send(line string) (string, <-chan Reply) {
	c.mu.Lock()
	c.next++
	tag := strconv.Itoa(c.next)
	ch := make(chan Reply, 1)
	c.wait[tag] = ch
	c.mu.Unlock()
	c.Raw(tag + " " + line + "\n")
	return tag, ch
}

// Raw writes bytes as they are.
func (c *Conn) Raw(s string) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.conn.Write([]byte(s))
}

// Do sends a line and waits (up to 10s) for its reply.
func (c *Conn) Do(line string) Reply {
	c.t.Helper()
	_, ch := c.Send(line)
	return c.Await(ch)
}

// Await waits (up to 10s) for a reply.
func (c *Conn) Await(ch <-chan Reply) Reply {
	c.t.Helper()
	select {
	case r := <-ch:
		return r
	case <-c.closed:
		select { // the reply may have come just before the close
		case r := <-ch:
			return r
		default:
		}
		c.t.Fatal("connection closed while waiting for a reply")
	case <-time.After(10 * time.Second):
		c.t.Fatal("no reply in 10s")
	}
	return Reply{}
}

// AwaitWaiters polls STATUS until the agent has n waiting LOCKs (up to 5s):
// a test's way to know a LOCK it sent is parked, without sleeping.
func (c *Conn) AwaitWaiters(n int64) {
	c.t.Helper()
	var waiters int64
	lockagenttest.Eventually(c.t, 5*time.Second, func() bool {
		waiters = c.Do("STATUS").Int("waiters")
		return waiters == n
	}, "the agent never had %d waiters (it has %d)", n, &waiters)
}

// Pushes is where push lines ("* ...") arrive.
func (c *Conn) Pushes() <-chan string { return c.pushes }

// Arrived is when push, a line Pushes gave, was read from the socket (a
// history.Stamp), and forgets it; 0 if it does not know the line. A
// client busy with a request reads a push only once its reply came: the
// push's arrival is when the agent had told it.
func (c *Conn) Arrived(push string) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	at := c.arrived[push]
	delete(c.arrived, push)
	return at
}

// AwaitMasters polls STATUS until n masters are in state (up, down or
// quarantined), for up to 5s.
func (c *Conn) AwaitMasters(state string, n int) {
	c.t.Helper()
	c.AwaitMastersWithin(5*time.Second, state, n)
}

// AwaitMastersWithin is AwaitMasters for up to timeout: for a state that
// the agent finds in a periodic check.
func (c *Conn) AwaitMastersWithin(timeout time.Duration, state string, n int) {
	c.t.Helper()
	var masters []map[string]string
	lockagenttest.Eventually(c.t, timeout, func() bool {
		masters = c.Do("STATUS").Data
		in := 0
		for _, d := range masters {
			if d["state"] == state {
				in++
			}
		}
		return in == n
	}, "never %d masters %s: %+v", n, state, &masters)
}

// Push returns the next push line, or "" after timeout.
func (c *Conn) Push(timeout time.Duration) string {
	select {
	case p := <-c.pushes:
		return p
	case <-time.After(timeout):
		return ""
	}
}
