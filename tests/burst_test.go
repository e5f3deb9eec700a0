package tests

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// burst is the outcome of many sessions each pipelining LOCKs of distinct
// names in one write.
type burst struct {
	granted, noQuorum, other int
	lost                     int    // LOST pushes seen during the burst
	first                    string // the first reply that was not OK
	took                     time.Duration
}

// pipelineLocks opens sessions connections, writes perSession LOCKs of
// distinct names on each in one write, and reads every reply. The
// connections stay open (holding the names) until the test ends.
func pipelineLocks(t testing.TB, sock string, sessions, perSession int, prefix string) burst {
	t.Helper()
	conns := make([]net.Conn, sessions)
	for i := range conns {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		conns[i] = c
	}
	var mu sync.Mutex
	var out burst
	var wg sync.WaitGroup
	start := time.Now()
	for s, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var req strings.Builder
			for i := range perSession {
				fmt.Fprintf(&req, "%d LOCK %s/%d/%d wait=60s\n", i, prefix, s, i)
			}
			if _, err := c.Write([]byte(req.String())); err != nil {
				t.Error(err)
				return
			}
			c.SetReadDeadline(time.Now().Add(2 * time.Minute))
			r := bufio.NewReader(c)
			for got := 0; got < perSession; {
				line, err := r.ReadString('\n')
				if err != nil {
					t.Error(err)
					return
				}
				if strings.HasPrefix(line, "* ") { // a push (LOST) is not a reply
					mu.Lock()
					out.lost++
					mu.Unlock()
					continue
				}
				got++
				f := strings.Fields(line)
				mu.Lock()
				switch {
				case len(f) > 1 && f[1] == "OK":
					out.granted++
				case len(f) > 2 && f[2] == "NO_QUORUM":
					out.noQuorum++
				default:
					out.other++
				}
				if (len(f) < 2 || f[1] != "OK") && out.first == "" {
					out.first = strings.TrimSpace(line)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	out.took = time.Since(start)
	return out
}

// TestABurstOfPipelinedLocksIsHeld: 20 sessions each pipelining 100 LOCKs
// of distinct names (2,000 at once) used to get 41 grants and 1,959
// NO_QUORUM: every one must be granted.
func TestABurstOfPipelinedLocksIsHeld(t *testing.T) {
	servers := redistest.Start(t, 3)
	a := agenttest.Start(t, agenttest.Config(t, servers, 15*time.Second))
	r := pipelineLocks(t, a.Config.Socket.Path, 20, 100, "burst")
	t.Logf("2,000 pipelined LOCKs: %d granted, %d NO_QUORUM, %d other, %d lost, in %v", r.granted, r.noQuorum, r.other, r.lost, r.took)
	if r.granted != 2000 || r.lost > 0 {
		t.Fatalf("%d of 2000 granted; first refusal: %s", r.granted, r.first)
	}
}

// BenchmarkBurst pipelines LOCKs of distinct names from many sessions at
// once and reports grants, refusals and throughput. Run it with
// -benchtime 1x: each run is one burst.
func BenchmarkBurst(b *testing.B) {
	for _, bc := range []struct{ sessions, perSession int }{{10, 100}, {100, 1000}} {
		b.Run(fmt.Sprintf("%dx%d", bc.sessions, bc.perSession), func(b *testing.B) {
			servers := redistest.Start(b, 3)
			cfg := agenttest.Config(b, servers, 15*time.Second)
			cfg.Limits.MaxHoldsPerSession = bc.perSession
			a := agenttest.Start(b, cfg)
			var r burst
			for i := 0; i < b.N; i++ {
				r = pipelineLocks(b, a.Config.Socket.Path, bc.sessions, bc.perSession, fmt.Sprintf("b%d", i))
			}
			n := float64(bc.sessions * bc.perSession)
			b.ReportMetric(float64(r.granted)/n*100, "granted-%")
			b.ReportMetric(float64(r.noQuorum), "no-quorum")
			b.ReportMetric(float64(r.lost), "lost")
			b.ReportMetric(n/r.took.Seconds(), "locks/s")
			if r.first != "" {
				b.Logf("first refusal: %s", r.first)
			}
		})
	}
}
