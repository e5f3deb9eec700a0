package tests

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/faultproxy"
	"github.com/lock-agent/lock-agent/internal/history"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// The election tests' harness: agents are real `lock-agent run` processes
// and candidates real processes (the test binary as a relay), so that
// "kill -9 of the leader" and "kill -9 of its agent" are real kills; each
// agent reaches each master through a faultproxy link of its own, so that
// an agent's masters can be cut off. Everything is recorded on the
// machine's monotonic clock (history.Stamp), the candidates stamping their
// own lines.

// relayEnv names the socket a relay process connects to.
const relayEnv = "LOCK_AGENT_RELAY_SOCKET"

// relay is the test binary as a client process the test can kill -9: it
// connects to the agent at path, sends each line it reads on stdin, and
// prints what it sends and reads, stamped with history.Stamp: "NS + connected",
// "NS > LINE" (stamped right before sending), "NS < LINE" (right after
// reading), "NS < EOF" when the agent closes the session; it exits then,
// or when its stdin closes.
func relay(path string) {
	conn, err := net.Dial("unix", path)
	if err != nil {
		fmt.Printf("%d ! %v\n", history.Stamp(), err)
		os.Exit(1)
	}
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	emit := func(stamp time.Duration, dir, line string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, "%d %s %s\n", stamp, dir, line)
		out.Flush()
	}
	emit(history.Stamp(), "+", "connected")
	go func() {
		in := bufio.NewScanner(os.Stdin)
		for in.Scan() {
			stamp := history.Stamp()
			conn.Write([]byte(in.Text() + "\n"))
			emit(stamp, ">", in.Text())
		}
		os.Exit(0)
	}()
	r := bufio.NewReader(conn)
	for {
		line, err := r.ReadString('\n')
		stamp := history.Stamp()
		if err != nil {
			emit(stamp, "<", "EOF")
			os.Exit(0)
		}
		emit(stamp, "<", strings.TrimSuffix(line, "\n"))
	}
}

// relayLine is one line a relay printed.
type relayLine struct {
	at   time.Duration // history.Stamp
	dir  string        // "+", ">", "<", "!"
	text string
}

// relayProc is a running relay.
type relayProc struct {
	cmd   *exec.Cmd
	mu    sync.Mutex // over stdin
	stdin io.WriteCloser
	lines chan relayLine // closed when its output ends
	done  chan struct{}  // closed once it exited and was waited for
}

func startRelay(t testing.TB, sock string) *relayProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), relayEnv+"="+sock, raceNoExitSleep)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &relayProc{cmd: cmd, stdin: stdin, lines: make(chan relayLine, 64), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		defer cmd.Wait()
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			stamp, rest, _ := strings.Cut(sc.Text(), " ")
			dir, text, _ := strings.Cut(rest, " ")
			ns, err := strconv.ParseInt(stamp, 10, 64)
			if err != nil {
				continue // the race detector's or the runtime's own output
			}
			p.lines <- relayLine{time.Duration(ns), dir, text}
		}
	}()
	t.Cleanup(func() { p.kill(); <-p.done })
	return p
}

func (p *relayProc) send(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	io.WriteString(p.stdin, line+"\n")
}

// kill kills the process with SIGKILL and returns the instant just before
// the signal was sent: from there it does nothing more.
func (p *relayProc) kill() time.Duration {
	at := history.Stamp()
	p.cmd.Process.Kill()
	return at
}

// fields parses the key=value words of a line.
func fields(line string) map[string]string {
	out := map[string]string{}
	for _, w := range strings.Fields(line) {
		if k, v, ok := strings.Cut(w, "="); ok {
			out[k] = v
		}
	}
	return out
}

// agentProc is one real `lock-agent run` process over its own links.
type agentProc struct {
	id, sock, cfgPath string
	links             []*faultproxy.Proxy // one per master
	cmd               *exec.Cmd
	done              chan struct{}
	logs              *syncBuffer
}

// newAgentProc writes the config of an agent that reaches each server
// through a link of its own; start runs it. Its drift factor gives the
// short lease production's margin (productionMargin): a LOST that the
// loaded test host delivers late by more than 1% of a 1s lease would
// otherwise read as an overlap.
func newAgentProc(t testing.TB, id string, servers []*redistest.Server, lease time.Duration) *agentProc {
	t.Helper()
	dir := shortTempDir(t)
	a := &agentProc{id: id, sock: filepath.Join(dir, "a.sock"), cfgPath: filepath.Join(dir, "agent.hcl")}
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "agent { id = %q }\nsocket { path = %q }\nlock {\n  lease = %q\n  drift_factor = %g\n}\n",
		id, a.sock, lease.String(), productionMargin(lease))
	for i, s := range servers {
		link, err := faultproxy.New(s.Addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(link.Close)
		a.links = append(a.links, link)
		fmt.Fprintf(&cfg, "redis \"m%d\" { address = %q }\n", i, link.Addr)
	}
	if err := os.WriteFile(a.cfgPath, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return a
}

func (a *agentProc) start(t testing.TB, bin string) {
	t.Helper()
	a.cmd = exec.Command(bin, "run", "-config", a.cfgPath)
	a.cmd.Env = append(os.Environ(), raceNoExitSleep)
	a.logs = &syncBuffer{}
	a.cmd.Stderr = a.logs
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done, cmd := make(chan struct{}), a.cmd
	a.done = done
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-done })
	waitForListener(t, a.sock)
}

// kill kills the agent with SIGKILL, waits for it to be gone, and returns
// the instant just before the signal.
func (a *agentProc) kill() time.Duration {
	at := history.Stamp()
	a.cmd.Process.Kill()
	<-a.done
	return at
}

// cut sets every link of the agent to mode: Cut cuts it off its masters,
// Pass heals it.
func (a *agentProc) cut(mode faultproxy.Mode) {
	for _, l := range a.links {
		l.SetMode(mode)
	}
}
