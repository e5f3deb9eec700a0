package tests

import (
	"bufio"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// liveBytes is the heap in use plus goroutine stacks after a full GC: what
// the process keeps for what it holds.
func liveBytes() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc + m.StackInuse
}

// memoryFootprint opens sessions connections to an in-process agent, takes
// holdsPer holds on each (pipelined, a few sessions at a time), and returns
// the live bytes per idle session and per hold. The client side is raw
// sockets that keep no per-line state, so the figures are the agent's (plus
// one net.Conn per session).
func memoryFootprint(t testing.TB, sessions, holdsPer int) (perSession, perHold float64) {
	servers := redistest.Start(t, 3)
	// A long lease: no renewal round (of every hold at once) runs while measuring.
	cfg := agenttest.Config(t, servers, 5*time.Minute)
	cfg.Limits.MaxHoldsPerSession = max(cfg.Limits.MaxHoldsPerSession, holdsPer)
	cfg.Lock.MasterTimeout = time.Second // a loaded test host must not fail rounds
	a := agenttest.Start(t, cfg)
	base := liveBytes()
	conns := dialSessions(t, a, sessions)
	defer closeSessions(conns)
	opened := liveBytes()
	holdMany(t, conns, holdsPer)
	held := liveBytes()
	st := agenttest.Dial(t, a.Config.Socket.Path).Do("STATUS")
	if got := st.Int("holds"); got != int64(sessions*holdsPer) {
		t.Fatalf("agent has %d holds, want %d", got, sessions*holdsPer)
	}
	runtime.KeepAlive(a)
	return (float64(opened) - float64(base)) / float64(sessions), (float64(held) - float64(opened)) / float64(sessions*holdsPer)
}

// dialSessions opens n sessions to a, each served (one PING) before it
// returns.
func dialSessions(t testing.TB, a *agenttest.Agent, n int) []*rawConn {
	conns := make([]*rawConn, n)
	for i := range conns {
		nc, err := net.Dial("unix", a.Config.Socket.Path)
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = &rawConn{nc, bufio.NewReaderSize(nc, 64)}
	}
	for _, c := range conns {
		c.roundTrip(t, "p PING\n", 1)
	}
	return conns
}

func closeSessions(conns []*rawConn) {
	for _, c := range conns {
		c.Close()
	}
}

// holdMany takes holdsPer holds (mem/SESSION/N) on each of conns,
// pipelined, a few sessions at a time.
func holdMany(t testing.TB, conns []*rawConn, holdsPer int) {
	const parallel, batch = 4, 100
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			for j := 0; j < holdsPer; j += batch {
				var b strings.Builder
				n := min(batch, holdsPer-j)
				for k := range n {
					fmt.Fprintf(&b, "l%d LOCK mem/%d/%d wait=10s\n", j+k, i, j+k)
				}
				c.roundTrip(t, b.String(), n)
			}
		}()
	}
	wg.Wait()
}

// rawConn is a client connection that keeps nothing per line.
type rawConn struct {
	net.Conn
	r *bufio.Reader
}

// roundTrip writes lines and reads n replies, each of which must be OK.
func (c *rawConn) roundTrip(t testing.TB, lines string, n int) {
	c.SetDeadline(time.Now().Add(60 * time.Second))
	if _, err := c.Write([]byte(lines)); err != nil {
		t.Error(err)
		return
	}
	for range n {
		line, err := c.r.ReadString('\n')
		if err != nil || !strings.Contains(line, " OK") {
			t.Errorf("reply %q %v", line, err)
			return
		}
	}
}

// BenchmarkMemory100kHolds is the footprint the issue was measured at: 100
// sessions holding 1,000 names each. It reports live agent bytes per idle
// session and per hold (targets: 16 KiB and 2 KiB).
func BenchmarkMemory100kHolds(b *testing.B) {
	for range b.N {
		perSession, perHold := memoryFootprint(b, 100, 1000)
		b.ReportMetric(perSession, "B/session")
		b.ReportMetric(perHold, "B/hold")
	}
}

// TestMemoryPerHoldAndSession is the cheap version: 20 sessions × 200
// holds, with bounds looser than the targets for a noisy heap.
func TestMemoryPerHoldAndSession(t *testing.T) {
	if testing.Short() {
		t.Skip("takes a few seconds")
	}
	perSession, perHold := memoryFootprint(t, 20, 200)
	t.Logf("%.0f B per idle session, %.0f B per hold", perSession, perHold)
	if perSession > 24<<10 {
		t.Errorf("an idle session costs %.0f bytes (want under 24 KiB)", perSession)
	}
	if perHold > 4<<10 {
		t.Errorf("a hold costs %.0f bytes (want under 4 KiB)", perHold)
	}
}
