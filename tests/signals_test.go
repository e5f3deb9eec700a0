package tests

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// binaryAgent runs `lock-agent run` over three real masters with a config
// file made of extra and the masters; it returns the process, its logs, the
// config file and the socket.
func binaryAgent(t *testing.T, extra string) (*exec.Cmd, *syncBuffer, string, string, []*redistest.Server) {
	t.Helper()
	servers := redistest.Start(t, 3)
	dir := shortTempDir(t)
	sock := filepath.Join(dir, "agent.sock")
	cfgPath := filepath.Join(dir, "agent.hcl")
	writeAgentConfig(t, cfgPath, sock, servers, extra)
	bootstrap(t, binary(t), cfgPath)
	cmd := exec.Command(binary(t), "run", "-config", cfgPath)
	cmd.Env = append(os.Environ(), raceNoExitSleep)
	logs := &syncBuffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	waitForListener(t, sock)
	return cmd, logs, cfgPath, sock, servers
}

// waitForListener waits until the agent accepts connections on sock: the
// socket file appears a moment before it listens.
func waitForListener(t testing.TB, sock string) {
	t.Helper()
	waitForSocket(t, sock)
	var err error
	lockagenttest.Eventually(t, 5*time.Second, func() bool {
		var conn net.Conn
		if conn, err = net.Dial("unix", sock); err == nil {
			conn.Close()
		}
		return err == nil
	}, "nothing listens on %s: %v", sock, &err)
}

func writeAgentConfig(t *testing.T, path, sock string, servers []*redistest.Server, extra string) {
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "agent { id = \"sig\" }\nsocket { path = %q }\n", sock)
	for i, s := range servers {
		fmt.Fprintf(&cfg, "redis \"m%d\" { address = %q }\n", i, s.Addr)
	}
	cfg.WriteString(extra)
	if err := os.WriteFile(path, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

func waitForLog(t *testing.T, logs *syncBuffer, want string) {
	t.Helper()
	lockagenttest.Eventually(t, 5*time.Second, func() bool { return strings.Contains(logs.String(), want) }, "no %q in the logs:\n%s", want, logs)
}

// TestBinarySIGHUPReloadsTheConfig: SIGHUP does not stop the agent. It
// reads the file again, applies the log level and limits, says which changes wait for
// a restart, and keeps the running config when the file is invalid. Holds
// are untouched throughout.
func TestBinarySIGHUPReloadsTheConfig(t *testing.T) {
	t.Parallel() // its own masters and agents; judges no latency
	cmd, logs, cfgPath, sock, servers := binaryAgent(t, "")
	c := agenttest.Dial(t, sock)
	c.AwaitMasters("up", 3)
	if r := c.Do("LOCK hup/held wait=2s"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}

	cmd.Process.Signal(syscall.SIGHUP)
	waitForLog(t, logs, "nothing changed")

	writeAgentConfig(t, cfgPath, sock, servers, "log { level = \"debug\" }\nlimits { max_waiters = 5 }\nlock { max_ttl = \"1m\" }\n")
	cmd.Process.Signal(syscall.SIGHUP)
	waitForLog(t, logs, "SIGHUP: applied: setting=Log.Level old=info new=debug")
	waitForLog(t, logs, "SIGHUP: applied: setting=Limits.MaxWaiters old=100000 new=5")
	// lock.max_ttl does nothing: it is named as deprecated, not as waiting for a restart.
	waitForLog(t, logs, "config: a deprecated setting is accepted and ignored: setting=lock.max_ttl")
	agenttest.Dial(t, sock).Do("PING") // logged only at debug level
	waitForLog(t, logs, "opened")

	os.WriteFile(cfgPath, []byte("redis \"a\" {\n  adress = \"x\"\n}\n"), 0o600)
	cmd.Process.Signal(syscall.SIGHUP)
	waitForLog(t, logs, "config not reloaded, keeping the running one")
	if !strings.Contains(logs.String(), "agent.hcl:2") {
		t.Errorf("the reload error does not say where:\n%s", logs.String())
	}
	if r := c.Do("HOLDS"); r.Fields["n"] != "1" {
		t.Fatalf("holds after SIGHUPs: %s\n%s", r.Line, logs.String())
	}
	if code, _, errOut := lockAgent(t, "exec", "-socket", sock, "-wait", "0", "hup/held", "--", "true"); code != 1 {
		t.Fatalf("the hold was released by SIGHUP: exit %d %s", code, errOut)
	}
	stopAndCheckReleased(t, cmd, syscall.SIGTERM, c, servers, logs)
}

// TestBinarySIGINTReleasesEverything: SIGINT stops the agent as SIGTERM
// does: holders are told, every hold is released, the socket is removed.
func TestBinarySIGINTReleasesEverything(t *testing.T) {
	t.Parallel() // its own masters and agents; judges no latency
	cmd, logs, _, sock, servers := binaryAgent(t, "")
	c := agenttest.Dial(t, sock)
	c.AwaitMasters("up", 3)
	if r := c.Do("LOCK int/held wait=2s"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	stopAndCheckReleased(t, cmd, syscall.SIGINT, c, servers, logs)
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Fatal("socket left behind")
	}
}

func stopAndCheckReleased(t *testing.T, cmd *exec.Cmd, sig syscall.Signal, c *agenttest.Conn, servers []*redistest.Server, logs *syncBuffer) {
	t.Helper()
	cmd.Process.Signal(sig)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if exitCode(err) != 0 {
			t.Fatalf("exit %d after %v\n%s", exitCode(err), sig, logs.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("still running 5s after %v\n%s", sig, logs.String())
	}
	if p := c.Push(time.Second); !strings.Contains(p, "reason=shutdown") {
		t.Fatalf("push after %v: %q", sig, p)
	}
	for _, s := range servers {
		if n := s.Keys("lock-agent:*:h:*"); n != 0 {
			t.Fatalf("%d holder keys left on %s after %v", n, s.Addr, sig)
		}
	}
}

// TestBinaryDevModeSurvivesSIGHUP: a -dev agent keeps running when its
// terminal closes (SIGHUP).
func TestBinaryDevModeSurvivesSIGHUP(t *testing.T) {
	cmd := exec.Command(binary(t), "run", "-dev")
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+shortTempDir(t), raceNoExitSleep)
	logs := &syncBuffer{}
	cmd.Stderr, cmd.Stdout = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	waitForLog(t, logs, "export LOCK_AGENT_SOCKET=")
	cmd.Process.Signal(syscall.SIGHUP)
	waitForLog(t, logs, "nothing to reload in dev mode")
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); exitCode(err) != 0 {
		t.Fatalf("exit %d after SIGHUP then SIGTERM\n%s", exitCode(err), logs.String())
	}
}

// TestBinaryOutlivesItsLogReader: with its log going to a pipe whose reader
// is gone (`run -dev 2>&1 | tee`, and the terminal closed), the agent's next
// log line must not kill it (SIGPIPE) before it has released its holds.
func TestBinaryOutlivesItsLogReader(t *testing.T) {
	t.Parallel() // its own masters and agents; judges no latency
	servers := redistest.Start(t, 3)
	dir := shortTempDir(t)
	sock := filepath.Join(dir, "agent.sock")
	cfgPath := filepath.Join(dir, "agent.hcl")
	writeAgentConfig(t, cfgPath, sock, servers, "")
	bootstrap(t, binary(t), cfgPath)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary(t), "run", "-config", cfgPath)
	cmd.Env = append(os.Environ(), raceNoExitSleep)
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	w.Close()
	waitForListener(t, sock)
	c := agenttest.Dial(t, sock)
	c.AwaitMasters("up", 3)
	if r := c.Do("LOCK pipe/held wait=2s"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	r.Close()                          // the reader goes away
	cmd.Process.Signal(syscall.SIGHUP) // and the agent logs
	// Nothing shows that the agent has handled the signal (its log goes to
	// the closed pipe): give it the time it takes, then see that it lives.
	time.Sleep(300 * time.Millisecond)
	if r := c.Do("PING"); r.Kind != "OK" {
		t.Fatalf("the agent died writing its log to a closed pipe: %s", r.Line)
	}
	stopAndCheckReleased(t, cmd, syscall.SIGTERM, c, servers, &syncBuffer{})
}
