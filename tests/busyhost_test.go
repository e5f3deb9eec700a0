package tests

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// cpuHogs starts n CPU-bound processes that run until the test ends (or
// stop is called): a busy host, as a build or another service beside the
// agent makes it.
func cpuHogs(t testing.TB, n int) (stop func()) {
	t.Helper()
	var cmds []*exec.Cmd
	for range n {
		cmd := exec.Command("sh", "-c", "while :; do :; done")
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			for _, c := range cmds {
				c.Process.Kill()
				c.Wait()
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// busyTally counts a load's replies by kind, and keeps the lines of the
// unexpected ones.
type busyTally struct {
	mu     sync.Mutex
	counts map[string]int
	bad    []string
}

func (b *busyTally) add(verb string, r agenttest.Reply) {
	kind := r.Kind
	if kind == "ERR" {
		kind += " " + r.Code
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.counts[verb+" "+kind]++
	if r.Kind == "ERR" && len(b.bad) < 20 {
		b.bad = append(b.bad, verb+": "+r.Line)
	}
}

// TestBusyHostIsNotNoQuorum: on a host whose two cores are taken by two
// CPU-bound processes, three masters and two agent processes answer every
// request of 64 clients (LOCK wait=0 on reused and fresh names, SET, CHECK
// from the other agent, WHO, UNLOCK) without one NO_QUORUM: the masters
// are slow, not down (the round waits for late answers within its budget:
// see rules.Patience). Before, about one request in a few hundred was
// refused NO_QUORUM "timed out" on such a host.
func TestBusyHostIsNotNoQuorum(t *testing.T) {
	t.Run("agents in their own processes", func(t *testing.T) {
		servers := redistest.Start(t, 3)
		agents := startProcAgents(t, releaseBinary(t), servers, "", "busy-a", "busy-b")
		busyLoad(t, agents[0].sock, agents[1].sock)
	})
	t.Run("agents in the test's process, under the race detector", func(t *testing.T) {
		servers := redistest.Start(t, 3)
		a, b := agenttest.Config(t, servers, 15*time.Second), agenttest.Config(t, servers, 15*time.Second)
		a.AgentID, b.AgentID = "busy-a", "busy-b"
		busyLoad(t, agenttest.Start(t, a).Config.Socket.Path, agenttest.Start(t, b).Config.Socket.Path)
	})
}

// busyLoad runs the load of TestBusyHostIsNotNoQuorum over two agents'
// sockets, beside two CPU hogs.
func busyLoad(t *testing.T, socks ...string) {
	cpuHogs(t, 2)
	tally := busyRun(t, soak(4*time.Second, 10*time.Second), socks...)
	total := 0
	var lines []string
	for k, n := range tally.counts {
		total += n
		lines = append(lines, fmt.Sprintf("%s=%d", k, n))
	}
	t.Logf("%d requests: %s", total, strings.Join(lines, " "))
	if len(tally.bad) > 0 {
		t.Fatalf("refused on a busy host with every master up:\n%s", strings.Join(tally.bad, "\n"))
	}
	if tally.counts["LOCK OK"] == 0 || tally.counts["CHECK OK"] == 0 || tally.counts["SET OK"] == 0 {
		t.Fatalf("the load granted too little to say anything: %v", tally.counts)
	}
}

// busyRun runs 64 clients over two agents' sockets for d: each cycles
// through a reused name and a fresh one (busyCycle), and a WHO from the
// other agent.
func busyRun(tb testing.TB, d time.Duration, socks ...string) *busyTally {
	tally := &busyTally{counts: map[string]int{}}
	until := time.Now().Add(d)
	var wg sync.WaitGroup
	for i := range 64 {
		here := agenttest.Dial(tb, socks[i%2])
		there := agenttest.Dial(tb, socks[(i+1)%2])
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer here.Close()
			defer there.Close()
			for k := 0; time.Now().Before(until); k++ {
				busyCycle(tally, here, there, fmt.Sprintf("busy/reused-%d", (i+k)%16))
				busyCycle(tally, here, there, fmt.Sprintf("busy/fresh-%d-%d", i, k))
				tally.add("WHO", there.Do(fmt.Sprintf("WHO busy/reused-%d", (i+k+1)%16)))
			}
		}()
	}
	wg.Wait()
	return tally
}

// BenchmarkStarvedMaster measures what a master starved of CPU costs: the
// load of TestBusyHostIsNotNoQuorum (agents in their own processes) beside
// two CPU hogs, with master 0 paused (and seen down), so that every round
// needs both others, and master 1 at niceness $LOCK_AGENT_NICE (default
// 19: it runs only now and then beside the hogs). It reports the requests
// and how many were refused NO_QUORUM.
// Not a test: how starved a master is depends on the host. go test -run
// '^$' -bench StarvedMaster -benchtime 1x ./tests/
func BenchmarkStarvedMaster(b *testing.B) {
	nice := 19
	if v := os.Getenv("LOCK_AGENT_NICE"); v != "" {
		var err error
		if nice, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	servers := redistest.Start(b, 3)
	agents := startProcAgents(b, releaseBinary(b), servers, "", "starved-a", "starved-b")
	servers[0].Pause()
	defer servers[0].Resume()
	servers[1].Nice(nice)
	for _, a := range agents {
		agenttest.Dial(b, a.sock).AwaitMasters("down", 1)
	}
	stop := cpuHogs(b, 2)
	defer stop()
	for range b.N {
		tally := busyRun(b, 5*time.Second, agents[0].sock, agents[1].sock)
		total, refused := 0, 0
		for k, n := range tally.counts {
			total += n
			if strings.HasSuffix(k, "NO_QUORUM") {
				refused += n
			}
		}
		b.ReportMetric(float64(total), "requests")
		b.ReportMetric(float64(refused), "no_quorum")
		if len(tally.bad) > 0 {
			b.Logf("first refusals: %s", strings.Join(tally.bad[:min(3, len(tally.bad))], "; "))
		}
	}
}

// busyCycle tries name once on here; if granted, sets its value, checks
// its fence on there and unlocks it.
func busyCycle(tally *busyTally, here, there *agenttest.Conn, name string) {
	r := here.Do("LOCK " + name + " wait=0")
	tally.add("LOCK", r)
	if r.Kind != "OK" {
		return
	}
	tally.add("SET", here.Do("SET "+name+" value=v"))
	tally.add("CHECK", there.Do(fmt.Sprintf("CHECK %s fence=%s", name, r.Fields["fence"])))
	tally.add("UNLOCK", here.Do("UNLOCK "+name))
}

// BenchmarkPausedMaster measures what a paused master costs: 16 clients of
// an agent in its own process lock (wait=0) and unlock 4 names, so that
// many rounds are split and need the third master's answer; one master is
// paused (SIGSTOP) for 2s in the middle. It reports the requests' latency
// while it is paused (p50, p99, max), how many, and how many were refused
// NO_QUORUM. go test -run '^$' -bench PausedMaster -benchtime 1x ./tests/
func BenchmarkPausedMaster(b *testing.B) {
	servers := redistest.Start(b, 3)
	agents := startProcAgents(b, releaseBinary(b), servers, "", "paused")
	for range b.N {
		var mu sync.Mutex
		var during []time.Duration
		noQuorum := 0
		var paused, resumed time.Time
		pauseAt, resumeAt := time.Now().Add(time.Second), time.Now().Add(3*time.Second)
		end := resumeAt.Add(500 * time.Millisecond)
		var wg sync.WaitGroup
		for i := range 16 {
			c := agenttest.Dial(b, agents[0].sock)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				for k := 0; time.Now().Before(end); k++ {
					name := fmt.Sprintf("paused/%d", (i+k)%4)
					start := time.Now()
					r := c.Do("LOCK " + name + " wait=0")
					took := time.Since(start)
					mu.Lock()
					if !paused.IsZero() && resumed.IsZero() {
						during = append(during, took)
						if r.Code == "NO_QUORUM" {
							noQuorum++
						}
					}
					mu.Unlock()
					if r.Kind == "OK" {
						c.Do("UNLOCK " + name)
					}
				}
			}()
		}
		time.Sleep(time.Until(pauseAt))
		mu.Lock()
		servers[2].Pause()
		paused = time.Now()
		mu.Unlock()
		time.Sleep(time.Until(resumeAt))
		mu.Lock()
		servers[2].Resume()
		resumed = time.Now()
		mu.Unlock()
		wg.Wait()
		slices.Sort(during)
		if len(during) == 0 {
			b.Fatal("no request while the master was paused")
		}
		b.ReportMetric(float64(len(during)), "requests")
		b.ReportMetric(float64(noQuorum), "no_quorum")
		b.ReportMetric(float64(during[len(during)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(during[len(during)*99/100].Microseconds())/1000, "p99-ms")
		b.ReportMetric(float64(during[len(during)-1].Microseconds())/1000, "max-ms")
	}
}
