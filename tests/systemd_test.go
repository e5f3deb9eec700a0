package tests

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/agent"
	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// The systemd protocol, spoken by the real binary to a fake systemd: a
// unixgram NOTIFY_SOCKET the test reads, WATCHDOG_USEC, and a listening
// socket passed as fd 3 with LISTEN_FDS/LISTEN_PID. No systemd is needed.

// sdNotify is a fake systemd's notify socket: it records every datagram.
type sdNotify struct {
	path string
	conn *net.UnixConn
	done chan struct{}

	mu   sync.Mutex
	msgs []sdMessage
	more chan struct{} // closed and replaced on each message
}

type sdMessage struct {
	at   time.Time
	text string // the datagram: NAME=value lines
}

func newSDNotify(t *testing.T) *sdNotify {
	t.Helper()
	n := &sdNotify{path: filepath.Join(shortTempDir(t), "notify.sock"), done: make(chan struct{}), more: make(chan struct{})}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: n.path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	n.conn = conn
	go n.read()
	t.Cleanup(func() {
		conn.Close()
		<-n.done
	})
	return n
}

func (n *sdNotify) read() {
	defer close(n.done)
	buf := make([]byte, 4096)
	for {
		k, err := n.conn.Read(buf)
		if err != nil {
			return
		}
		n.mu.Lock()
		n.msgs = append(n.msgs, sdMessage{at: time.Now(), text: string(buf[:k])})
		close(n.more)
		n.more = make(chan struct{})
		n.mu.Unlock()
	}
}

// since returns the messages from index from on, and the index after them.
func (n *sdNotify) since(from int) ([]sdMessage, int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]sdMessage(nil), n.msgs[min(from, len(n.msgs)):]...), len(n.msgs)
}

// waitFor returns the index of the first message from index from on that
// has the line want (or, for "STATUS=..." wants, a STATUS= line that
// contains the rest), waiting up to d.
func (n *sdNotify) waitFor(t *testing.T, from int, want string, d time.Duration) int {
	t.Helper()
	deadline := time.After(d)
	for {
		n.mu.Lock()
		for i := from; i < len(n.msgs); i++ {
			if hasLine(n.msgs[i].text, want) {
				n.mu.Unlock()
				return i
			}
		}
		more := n.more
		n.mu.Unlock()
		select {
		case <-more:
		case <-deadline:
			t.Fatalf("no %q from the agent in %v; it sent:\n%s", want, d, n.dump(from))
		}
	}
}

func hasLine(msg, want string) bool {
	for _, line := range strings.Split(msg, "\n") {
		if line == want {
			return true
		}
		if rest, ok := strings.CutPrefix(want, "STATUS="); ok && strings.HasPrefix(line, "STATUS=") && strings.Contains(line, rest) {
			return true
		}
	}
	return false
}

// count is how many messages from index from on have the line want.
func (n *sdNotify) count(from int, want string) int {
	msgs, _ := n.since(from)
	c := 0
	for _, m := range msgs {
		if hasLine(m.text, want) {
			c++
		}
	}
	return c
}

// maxGap is the longest time between two messages with the line want from
// index from on, and from the last of them to now.
func (n *sdNotify) maxGap(from int, want string) time.Duration {
	msgs, _ := n.since(from)
	var gap time.Duration
	var last time.Time
	for _, m := range msgs {
		if !hasLine(m.text, want) {
			continue
		}
		if !last.IsZero() {
			gap = max(gap, m.at.Sub(last))
		}
		last = m.at
	}
	if last.IsZero() {
		return time.Duration(1<<63 - 1)
	}
	return max(gap, time.Since(last))
}

func (n *sdNotify) dump(from int) string {
	msgs, _ := n.since(from)
	var b strings.Builder
	for _, m := range msgs {
		fmt.Fprintf(&b, "  %s %q\n", m.at.Format("15:04:05.000"), m.text)
	}
	return b.String()
}

// systemdAgent starts the binary bin as systemd would: with NOTIFY_SOCKET,
// the extra environment, and files passed from fd 3 on with LISTEN_FDS and
// LISTEN_PID (which must be the agent's own pid: a shell sets it and execs).
func systemdAgent(t *testing.T, bin, cfgPath string, notify *sdNotify, env []string, files ...*os.File) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	cmd := exec.Command(bin, "run", "-config", cfgPath)
	if len(files) > 0 {
		cmd = exec.Command("sh", "-c", `LISTEN_PID=$$ exec "$0" "$@"`, bin, "run", "-config", cfgPath)
		env = append(env, fmt.Sprintf("LISTEN_FDS=%d", len(files)), "LISTEN_FDNAMES=lock-agent.socket")
		cmd.ExtraFiles = files
	}
	cmd.Env = append(os.Environ(), raceNoExitSleep)
	if notify != nil {
		cmd.Env = append(cmd.Env, "NOTIFY_SOCKET="+notify.path)
	}
	cmd.Env = append(cmd.Env, env...)
	logs := &syncBuffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd, logs
}

// sigterm stops the agent and wants exit code 0 within 10s.
func sigterm(t *testing.T, cmd *exec.Cmd, logs *syncBuffer) {
	t.Helper()
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if exitCode(err) != 0 {
			t.Fatalf("exit %d after SIGTERM\n%s", exitCode(err), logs.String())
		}
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("still running 10s after SIGTERM\n%s", logs.String())
	}
}

// pausedMasters starts and bootstraps n masters, then pauses them: they are
// down for the agent until resumed.
func pausedMasters(t *testing.T, bin string, n int, sock string) ([]*redistest.Server, string) {
	servers := redistest.Start(t, n)
	cfgPath := filepath.Join(filepath.Dir(sock), "agent.hcl")
	writeAgentConfig(t, cfgPath, sock, servers, "")
	bootstrap(t, bin, cfgPath)
	for _, s := range servers {
		s.Pause()
	}
	t.Cleanup(func() {
		for _, s := range servers {
			s.Resume()
		}
	})
	return servers, cfgPath
}

// TestSystemdNotifyReadyWaitsForQuorum: with every master down, the agent
// listens but is not READY; it says so in STATUS=; READY=1 comes only once
// a quorum is up. STATUS= then follows sessions and holds, and SIGTERM
// sends STOPPING=1.
func TestSystemdNotifyReadyWaitsForQuorum(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	notify := newSDNotify(t)
	sock := filepath.Join(shortTempDir(t), "agent.sock")
	servers, cfgPath := pausedMasters(t, bin, 3, sock)
	cmd, logs := systemdAgent(t, bin, cfgPath, notify, nil)
	waitForListener(t, sock)

	waiting := notify.waitFor(t, 0, "STATUS=no quorum: 0/3 masters up (2 needed)", 5*time.Second)
	servers[0].Resume()
	oneUp := notify.waitFor(t, waiting, "STATUS=no quorum: 1/3 masters up (2 needed)", 10*time.Second)
	time.Sleep(500 * time.Millisecond) // time for a wrong READY=1 to arrive
	if n := notify.count(0, "READY=1"); n != 0 {
		t.Fatalf("READY=1 with one master of three up:\n%s\n%s", notify.dump(0), logs.String())
	}
	servers[1].Resume()
	ready := notify.waitFor(t, oneUp, "READY=1", 10*time.Second)
	msgs, _ := notify.since(ready)
	if !hasLine(msgs[0].text, "STATUS=quorum: 2/3 masters up (2 needed)") {
		t.Fatalf("READY=1 without its STATUS=: %q", msgs[0].text)
	}

	c := agenttest.Dial(t, sock)
	if r := c.Do("LOCK sd/one wait=5s"); r.Kind != "OK" {
		t.Fatalf("lock with a quorum: %s", r.Line)
	}
	notify.waitFor(t, ready, "STATUS=; sessions=1 holds=1 waiters=0", 5*time.Second)
	servers[2].Resume()
	notify.waitFor(t, ready, "STATUS=quorum: 3/3 masters up (2 needed)", 10*time.Second)

	before, _ := notify.since(0)
	sigterm(t, cmd, logs)
	stopping := notify.waitFor(t, len(before), "STOPPING=1", time.Second)
	if n := notify.count(0, "READY=1"); n != 1 {
		t.Fatalf("READY=1 sent %d times:\n%s", n, notify.dump(0))
	}
	msgs, _ = notify.since(stopping)
	if !strings.Contains(msgs[0].text, "STATUS=stopping") {
		t.Fatalf("STOPPING=1 without a STATUS=: %q", msgs[0].text)
	}
}

// TestSystemdNotifyReadyAfterTimeoutWithoutQuorum: no master ever answers;
// READY=1 comes after systemd.ready_timeout with STATUS= saying so, and
// not before.
func TestSystemdNotifyReadyAfterTimeoutWithoutQuorum(t *testing.T) {
	bin := binary(t)
	notify := newSDNotify(t)
	dir := shortTempDir(t)
	sock := filepath.Join(dir, "agent.sock")
	cfgPath := filepath.Join(dir, "agent.hcl")
	writeAgentConfig(t, cfgPath, sock, redistest.Reserve(t, 3), "systemd { ready_timeout = \"1500ms\" }\n")
	start := time.Now()
	cmd, logs := systemdAgent(t, bin, cfgPath, notify, nil)
	waitForListener(t, sock)
	ready := notify.waitFor(t, 0, "READY=1", 10*time.Second)
	msgs, _ := notify.since(ready)
	if took := msgs[0].at.Sub(start); took < 1500*time.Millisecond {
		t.Fatalf("READY=1 %v after start, before the ready_timeout", took)
	}
	if !hasLine(msgs[0].text, "STATUS=no quorum: 0/3 masters up (2 needed)") {
		t.Fatalf("READY=1 without a STATUS= saying there is no quorum: %q", msgs[0].text)
	}
	sigterm(t, cmd, logs)
	notify.waitFor(t, ready, "STOPPING=1", time.Second)
	if !strings.Contains(logs.String(), "no quorum of masters after systemd.ready_timeout") {
		t.Fatalf("no warning in the log:\n%s", logs.String())
	}
}

var (
	hooksBuildOnce sync.Once
	hooksBinPath   string
	hooksBuildErr  error
)

// binaryWithTestHooks builds cmd/lock-agent with the lockagent_testhooks tag:
// LOCK_AGENT_TEST_WEDGE_FILE then wedges the loop named in that file.
func binaryWithTestHooks(t *testing.T) string {
	t.Helper()
	hooksBuildOnce.Do(func() {
		if hooksBinPath = prebuilt("lock-agent-race-testhooks"); hooksBinPath != "" {
			return
		}
		dir, err := os.MkdirTemp("", "lock-agent-bin")
		if err != nil {
			hooksBuildErr = err
			return
		}
		hooksBinPath = filepath.Join(dir, "lock-agent")
		out, err := exec.Command("go", "build", "-race", "-tags", "lockagent_testhooks", "-o", hooksBinPath, "../cmd/lock-agent").CombinedOutput()
		if err != nil {
			hooksBuildErr = fmt.Errorf("%v: %s", err, out)
		}
	})
	if hooksBuildErr != nil {
		t.Fatal(hooksBuildErr)
	}
	return hooksBinPath
}

// TestSystemdWatchdogPingsStopWhenALoopIsWedged: with WATCHDOG_USEC set the
// agent pings at half the interval; wedging its accept loop, then its
// renewal watchdog, stops the pings (and says why in STATUS=) until the
// loop turns again.
func TestSystemdWatchdogPingsStopWhenALoopIsWedged(t *testing.T) {
	bin := binaryWithTestHooks(t)
	notify := newSDNotify(t)
	sock := filepath.Join(shortTempDir(t), "agent.sock")
	servers, cfgPath := pausedMasters(t, bin, 3, sock)
	for _, s := range servers {
		s.Resume()
	}
	wedgeFile := filepath.Join(t.TempDir(), "wedge")
	os.WriteFile(wedgeFile, nil, 0o600)
	cmd, logs := systemdAgent(t, bin, cfgPath, notify, []string{"WATCHDOG_USEC=400000", "LOCK_AGENT_TEST_WEDGE_FILE=" + wedgeFile})
	ready := notify.waitFor(t, 0, "READY=1", 10*time.Second)
	c := agenttest.Dial(t, sock)
	if r := c.Do("LOCK sd/wedge wait=5s"); r.Kind != "OK" { // a hold for the watchdog to renew meanwhile
		t.Fatal(r.Line)
	}

	pingsIn := func(from int, d time.Duration) int {
		time.Sleep(d)
		return notify.count(from, "WATCHDOG=1")
	}
	// Past the time after which a silent loop counts as wedged (3s), the
	// pings go on, one every 200ms: every loop keeps proving it turns.
	if n := pingsIn(ready, 5*time.Second); n < 15 {
		t.Fatalf("%d WATCHDOG=1 in 5s with WATCHDOG_USEC=400000:\n%s", n, notify.dump(ready))
	}
	if gap := notify.maxGap(ready, "WATCHDOG=1"); gap > time.Second {
		t.Fatalf("no WATCHDOG=1 for %v with every loop healthy:\n%s", gap, notify.dump(ready))
	}
	for _, loop := range []string{"accept loop", "renewal watchdog"} {
		_, from := notify.since(0)
		os.WriteFile(wedgeFile, []byte(loop), 0o600)
		if loop == "accept loop" { // it sits in Accept until a beat: a client wakes it at once
			agenttest.Dial(t, sock)
		}
		unhealthy := notify.waitFor(t, from, "STATUS=unhealthy: "+loop+" silent for", 10*time.Second)
		if n := pingsIn(unhealthy, 1500*time.Millisecond); n != 0 {
			t.Fatalf("%d WATCHDOG=1 with the %s wedged:\n%s", n, loop, notify.dump(from))
		}
		if !strings.Contains(logs.String(), "wedged") {
			t.Fatalf("a wedged %s is not logged:\n%s", loop, logs.String())
		}
		os.WriteFile(wedgeFile, nil, 0o600)
		notify.waitFor(t, unhealthy, "WATCHDOG=1", 5*time.Second)
		notify.waitFor(t, unhealthy, "STATUS=quorum: 3/3 masters up", 5*time.Second)
		if r := c.Do("PING"); r.Kind != "OK" {
			t.Fatalf("PING after the %s turned again: %s", loop, r.Line)
		}
	}
	_, from := notify.since(0)
	sigterm(t, cmd, logs)
	notify.waitFor(t, from, "STOPPING=1", time.Second)
}

// activationSocket is what systemd does for a .socket unit: it creates and
// listens on the socket, and keeps it across the service's restarts.
func activationSocket(t *testing.T, path string) *os.File {
	t.Helper()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o666); err != nil { // not the config's mode: the agent must leave it
		t.Fatal(err)
	}
	f, err := ln.File()
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close() // f is a duplicate of the listening socket
	t.Cleanup(func() { f.Close() })
	return f
}

// TestSystemdSocketActivation: the agent serves on the socket passed as
// fd 3 instead of making its own, leaves its mode and file alone, and a
// client that connects while no agent runs is served by the next one.
func TestSystemdSocketActivation(t *testing.T) {
	t.Parallel() // its own masters and agents; judges no latency
	bin := binary(t)
	notify := newSDNotify(t)
	sock := filepath.Join(shortTempDir(t), "agent.sock")
	servers, cfgPath := pausedMasters(t, bin, 3, sock)
	for _, s := range servers {
		s.Resume()
	}
	listener := activationSocket(t, sock)

	early := agenttest.Dial(t, sock) // before any agent runs: it waits in the backlog
	_, earlyReply := early.Send("PING")
	cmd, logs := systemdAgent(t, bin, cfgPath, notify, nil, listener)
	if r := early.Await(earlyReply); r.Kind != "OK" {
		t.Fatalf("a client that connected before the agent started: %s\n%s", r.Line, logs.String())
	}
	notify.waitFor(t, 0, "READY=1", 10*time.Second)
	if !strings.Contains(logs.String(), "from_systemd=true") {
		t.Fatalf("the agent does not say it uses systemd's socket:\n%s", logs.String())
	}
	c := agenttest.Dial(t, sock)
	if r := c.Do("LOCK sd/activated wait=5s"); r.Kind != "OK" {
		t.Fatalf("lock through the activated socket: %s", r.Line)
	}
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o666 {
		t.Fatalf("systemd's socket was changed: %v %v", fi.Mode(), err)
	}
	sigterm(t, cmd, logs)
	if fi, err := os.Stat(sock); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("the agent removed systemd's socket on exit: %v", err)
	}

	// Between two agents: the socket still takes connections.
	between := agenttest.Dial(t, sock)
	_, reply := between.Send("PING")
	cmd, logs = systemdAgent(t, bin, cfgPath, notify, nil, listener)
	if r := between.Await(reply); r.Kind != "OK" {
		t.Fatalf("a client that connected between two agents: %s\n%s", r.Line, logs.String())
	}
	sigterm(t, cmd, logs)
}

// TestSystemdActivationRefusesASocketAtAnotherPath: a socket unit whose
// ListenStream= is not socket.path is a mistake that would leave clients
// waiting on a socket nobody serves; the agent fails at start and says so.
func TestSystemdActivationRefusesASocketAtAnotherPath(t *testing.T) {
	bin := binary(t)
	dir := shortTempDir(t)
	sock := filepath.Join(dir, "agent.sock")
	cfgPath := filepath.Join(dir, "agent.hcl")
	writeAgentConfig(t, cfgPath, sock, redistest.Reserve(t, 3), "")
	other := activationSocket(t, filepath.Join(dir, "other.sock"))
	cmd, logs := systemdAgent(t, bin, cfgPath, nil, nil, other)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("still running 10s after it was given a socket at another path\n%s", logs.String())
	}
	if exitCode(err) != 1 || !strings.Contains(logs.String(), "socket activation") || !strings.Contains(logs.String(), "other.sock") {
		t.Fatalf("exit %d (%v)\n%s", exitCode(err), err, logs.String())
	}
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the agent made its own socket anyway: %v", err)
	}
}

// TestSystemdUnitsExample checks the service and socket units against what
// the agent does: notify readiness and watchdog, and a socket at the
// agent's default path that survives the service's restarts.
func TestSystemdUnitsExample(t *testing.T) {
	service := unitSettings(t, "../examples/systemd/lock-agent.service")
	socket := unitSettings(t, "../examples/systemd/lock-agent.socket")
	for _, c := range []struct{ unit, key, want string }{
		{"service", "Type", "notify"},
		{"service", "NotifyAccess", "main"},
		{"service", "Requires", "lock-agent.socket"},
		{"service", "Also", "lock-agent.socket"},
		{"service", "Restart", "on-failure"},
		{"service", "RuntimeDirectory", "lock-agent"},
		{"service", "RuntimeDirectoryPreserve", "yes"}, // else the socket in it is deleted when the agent stops
		{"socket", "ListenStream", agent.DefaultSocketPath},
		{"socket", "SocketMode", "0660"},
		{"socket", "SocketGroup", service["Group"]},
		{"socket", "DirectoryMode", "0750"},
		{"socket", "Accept", "no"},
		{"socket", "WantedBy", "sockets.target"},
	} {
		settings := map[string]map[string]string{"service": service, "socket": socket}[c.unit]
		if got := settings[c.key]; got != c.want {
			t.Errorf("%s unit: %s=%q, want %q", c.unit, c.key, got, c.want)
		}
	}
	if !slices.Contains(strings.Fields(service["After"]), "lock-agent.socket") {
		t.Errorf("service unit: After=%q lacks lock-agent.socket", service["After"])
	}
	watchdog, err := time.ParseDuration(service["WatchdogSec"] + "s")
	if err != nil || watchdog < 10*time.Second {
		t.Errorf("service unit: WatchdogSec=%q, want 10 or more (a wedge takes up to 4s to be seen)", service["WatchdogSec"])
	}
	start, err := time.ParseDuration(service["TimeoutStartSec"] + "s")
	if ready := agent.Default().Systemd.ReadyTimeout; err != nil || start <= ready {
		t.Errorf("service unit: TimeoutStartSec=%q, want more than systemd.ready_timeout (%v)", service["TimeoutStartSec"], ready)
	}
}
