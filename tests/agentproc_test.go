package tests

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// The out-of-process agent of the benchmarks: the real `lock-agent run`,
// built as users build it (no race detector), in a process of its own, so
// that its clients in the test process pay what users pay to reach it (a
// socket wake-up between two processes, two Go runtimes), and so that its
// memory and CPU can be read from outside, in /proc.

var releaseBuild struct {
	once sync.Once
	path string
	err  error
}

// releaseBinary builds cmd/lock-agent without -race, once per test
// process, unless scripts/test built it (prebuilt).
func releaseBinary(t testing.TB) string {
	t.Helper()
	releaseBuild.once.Do(func() {
		if releaseBuild.path = prebuilt("lock-agent"); releaseBuild.path != "" {
			return
		}
		dir, err := os.MkdirTemp("", "lock-agent-release")
		if err != nil {
			releaseBuild.err = err
			return
		}
		releaseBuild.path = filepath.Join(dir, "lock-agent")
		out, err := exec.Command("go", "build", "-o", releaseBuild.path, "../cmd/lock-agent").CombinedOutput()
		if err != nil {
			releaseBuild.err = fmt.Errorf("%v: %s", err, out)
		}
	})
	if releaseBuild.err != nil {
		t.Fatal(releaseBuild.err)
	}
	return releaseBuild.path
}

// procAgent is a running `lock-agent run` process.
type procAgent struct {
	id, sock string
	cmd      *exec.Cmd
	done     chan struct{} // closed once the process exited and was waited for
	exit     error         // cmd.Wait's, once done is closed
	logs     *syncBuffer
}

// pid is the agent process's id, for reading /proc/PID.
func (a *procAgent) pid() int { return a.cmd.Process.Pid }

// procMasters are the masters of an agent process: the body of each of
// its redis blocks, in order.
type procMasters []string

// standaloneMasters are servers as masters, each a standalone Redis.
func standaloneMasters(servers []*redistest.Server) procMasters {
	out := make(procMasters, len(servers))
	for i, s := range servers {
		out[i] = fmt.Sprintf("address = %q", s.Addr)
	}
	return out
}

// clusterMasters are clusters as masters, each a Redis Cluster named by
// its primaries as seed nodes.
func clusterMasters(clusters []*redistest.Cluster) procMasters {
	out := make(procMasters, len(clusters))
	for i, c := range clusters {
		seeds := make([]string, len(c.Seeds()))
		for j, s := range c.Seeds() {
			seeds[j] = strconv.Quote(s)
		}
		out[i] = "cluster = [" + strings.Join(seeds, ", ") + "]"
	}
	return out
}

// procAgentConfig writes the agent.hcl of an agent id over servers into a
// fresh directory, with lockBlock as the body of its lock block, and
// returns its path and the agent's socket.
func procAgentConfig(t testing.TB, id string, servers []*redistest.Server, lockBlock string) (cfgPath, sock string) {
	t.Helper()
	return procAgentConfigOver(t, id, standaloneMasters(servers), lockBlock)
}

// procAgentConfigOver is procAgentConfig over masters of any kind.
func procAgentConfigOver(t testing.TB, id string, masters procMasters, lockBlock string) (cfgPath, sock string) {
	t.Helper()
	dir := shortTempDir(t)
	sock = filepath.Join(dir, "a.sock")
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "agent { id = %q }\nsocket { path = %q }\nlock {\n%s}\n", id, sock, lockBlock)
	for i, m := range masters {
		fmt.Fprintf(&cfg, "redis \"m%d\" { %s }\n", i, m)
	}
	cfgPath = filepath.Join(dir, "agent.hcl")
	if err := os.WriteFile(cfgPath, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfgPath, sock
}

// startProcAgents bootstraps servers as new masters (with the first
// agent's config: they all share the lock settings) and starts one agent
// process per id, each waited for until it listens and sees every master
// up. The processes start all at once, then are waited for in turn: 64
// agents start in the time of a few. Each is stopped with SIGTERM when the
// test ends, and must exit 0.
func startProcAgents(t testing.TB, bin string, servers []*redistest.Server, lockBlock string, ids ...string) []*procAgent {
	t.Helper()
	return startProcAgentsOver(t, bin, standaloneMasters(servers), lockBlock, ids...)
}

// startProcAgentsOver is startProcAgents over masters of any kind, three
// of them.
func startProcAgentsOver(t testing.TB, bin string, masters procMasters, lockBlock string, ids ...string) []*procAgent {
	t.Helper()
	agents := make([]*procAgent, len(ids))
	for i, id := range ids {
		cfgPath, sock := procAgentConfigOver(t, id, masters, lockBlock)
		if i == 0 {
			bootstrap(t, bin, cfgPath)
		}
		agents[i] = launchProcAgent(t, bin, id, cfgPath, sock)
	}
	for _, a := range agents {
		a.await(t)
	}
	return agents
}

// startProcAgent starts one agent process and waits until it listens and
// sees every master up.
func startProcAgent(t testing.TB, bin, id, cfgPath, sock string) *procAgent {
	t.Helper()
	a := launchProcAgent(t, bin, id, cfgPath, sock)
	a.await(t)
	return a
}

// launchProcAgent starts one agent process, and its stop when the test
// ends, without waiting for it.
func launchProcAgent(t testing.TB, bin, id, cfgPath, sock string) *procAgent {
	t.Helper()
	a := &procAgent{id: id, sock: sock, cmd: exec.Command(bin, "run", "-config", cfgPath), done: make(chan struct{}), logs: &syncBuffer{}}
	a.cmd.Stderr = a.logs
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { a.exit = a.cmd.Wait(); close(a.done) }()
	t.Cleanup(func() { a.stop(t) })
	return a
}

// await waits until the agent listens and sees every master up.
func (a *procAgent) await(t testing.TB) {
	t.Helper()
	waitForListener(t, a.sock)
	c := agenttest.Dial(t, a.sock)
	defer c.Close()
	c.AwaitMasters("up", 3)
}

// stop sends SIGTERM and waits for the process; it fails the test if the
// agent did not exit 0 within 10s (and kills it then).
func (a *procAgent) stop(t testing.TB) {
	a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.done:
		if code := exitCode(a.exit); code != 0 {
			t.Errorf("agent %s exited %d:\n%s", a.id, code, a.logs.String())
		}
	case <-time.After(10 * time.Second):
		a.cmd.Process.Kill()
		<-a.done
		t.Errorf("agent %s still running 10s after SIGTERM:\n%s", a.id, a.logs.String())
	}
}

// rssBytes is the resident set of process pid: VmRSS in /proc/PID/status.
func rssBytes(t testing.TB, pid int) int64 { return procStatusBytes(t, pid, "VmRSS") }

// peakRSSBytes is the largest resident set process pid had so far: VmHWM.
func peakRSSBytes(t testing.TB, pid int) int64 { return procStatusBytes(t, pid, "VmHWM") }

// procStatusBytes reads one of the sizes in /proc/PID/status, given in kB.
func procStatusBytes(t testing.TB, pid int, field string) int64 {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("%s %q: %v", field, rest, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// userHZ is the unit of the CPU times in /proc/PID/stat: USER_HZ, which
// Linux fixes at 100 for every user-visible interface.
const userHZ = 100

// cpuTime is the CPU time process pid used so far, user and system:
// utime + stime in /proc/PID/stat.
func cpuTime(t testing.TB, pid int) time.Duration {
	t.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// The command name (field 2) may hold spaces; the fields after its
	// closing parenthesis start at field 3 (state), so utime (field 14)
	// and stime (field 15) are the 12th and 13th.
	_, rest, _ := strings.Cut(string(stat), ") ")
	f := strings.Fields(rest)
	if len(f) < 13 {
		t.Fatalf("/proc/%d/stat: %q", pid, stat)
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("/proc/%d/stat: %q: %v", pid, s, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ
}

// TestProcAgentsShareTheirMasters: two agent processes from
// startProcAgents serve LOCKs over the same masters (a name one holds is
// busy on the other), and are read from outside: a resident set of more
// than a MiB, and CPU time spent starting.
func TestProcAgentsShareTheirMasters(t *testing.T) {
	servers := redistest.Start(t, 3)
	agents := startProcAgents(t, binary(t), servers, compareLock, "x", "y")
	x, y := agenttest.Dial(t, agents[0].sock), agenttest.Dial(t, agents[1].sock)
	if r := x.Do("LOCK shared"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	if r := y.Do("LOCK shared wait=0"); r.Kind != "BUSY" {
		t.Fatalf("the other agent's LOCK of a held name: %s", r.Line)
	}
	if rss := rssBytes(t, agents[0].pid()); rss < 1<<20 {
		t.Errorf("agent's VmRSS %d bytes", rss)
	}
	if cpu := cpuTime(t, agents[0].pid()); cpu <= 0 {
		t.Errorf("agent's CPU time %v", cpu)
	}
}

// TestProcReadersFollowTheProcess: rssBytes and cpuTime of a process grow
// by what it does: 64 MiB touched (and peakRSSBytes with them), CPU spent
// spinning. The process is a child of its own (this binary, see
// procChild): this one's size moves with what the tests beside it free.
func TestProcReadersFollowTheProcess(t *testing.T) {
	t.Parallel() // its own process; judges no latency
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), procChildEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	out := bufio.NewReader(stdout)
	step := func(say, want string) {
		t.Helper()
		if say != "" {
			if _, err := fmt.Fprintln(stdin, say); err != nil {
				t.Fatal(err)
			}
		}
		if line, err := out.ReadString('\n'); err != nil || line != want+"\n" {
			t.Fatalf("the child said %q %v, want %q", line, err, want)
		}
	}
	pid := cmd.Process.Pid
	step("", "ready")
	before := rssBytes(t, pid)
	step("touch", "touched")
	if grew := rssBytes(t, pid) - before; grew < 32<<20 {
		t.Errorf("VmRSS grew by %d bytes after touching 64 MiB", grew)
	}
	if peak := peakRSSBytes(t, pid); peak < before+32<<20 {
		t.Errorf("VmHWM %d bytes after touching 64 MiB over a VmRSS of %d", peak, before)
	}
	cpu0 := cpuTime(t, pid)
	step("spin", "spinning")
	deadline := time.Now().Add(10 * time.Second)
	for cpuTime(t, pid)-cpu0 < 100*time.Millisecond {
		if time.Now().After(deadline) {
			t.Fatalf("CPU time did not grow by 100ms in 10s of spinning")
		}
		time.Sleep(10 * time.Millisecond) // polled: /proc sends no event
	}
}

// procChildEnv makes this binary the child of TestProcReadersFollowTheProcess.
const procChildEnv = "LOCK_AGENT_PROC_CHILD"

// procChild says "ready"; on "touch" touches 64 MiB and says "touched";
// on "spin" says "spinning" and spins until its stdin closes or it is killed.
func procChild() {
	in := bufio.NewScanner(os.Stdin)
	fmt.Println("ready")
	var block []byte
	for in.Scan() {
		switch in.Text() {
		case "touch":
			block = make([]byte, 64<<20)
			for i := range block {
				block[i] = byte(i)
			}
			fmt.Println("touched")
		case "spin":
			fmt.Println("spinning")
			go func() {
				for {
					block[0]++
				}
			}()
		}
	}
	runtime.KeepAlive(block)
}
