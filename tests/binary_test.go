package tests

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// raceNoExitSleep stops the race runtime's 1s sleep at exit, so the time to
// stop that tests measure is the agent's own.
const raceNoExitSleep = "GORACE=atexit_sleep_ms=0"

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// bootstrap runs `lock-agent bootstrap` on the new masters of a config, as
// an operator does once for a new deployment.
func bootstrap(t testing.TB, bin, cfgPath string) {
	t.Helper()
	if out, err := exec.Command(bin, "bootstrap", "-config", cfgPath).CombinedOutput(); err != nil || !strings.Contains(string(out), "bootstrapped as a new master") {
		t.Fatalf("bootstrap: %v\n%s", err, out)
	}
}

// prebuilt is the binary name that scripts/test built before it started
// the test processes, in LOCK_AGENT_TEST_BIN_DIR, or "" if there is none:
// the tests are then run in many processes (see scripts/test), and each
// would link its own.
func prebuilt(name string) string {
	dir := os.Getenv("LOCK_AGENT_TEST_BIN_DIR")
	if dir == "" {
		return ""
	}
	path := filepath.Join(dir, name)
	if _, err := os.Stat(path); err != nil {
		return ""
	}
	return path
}

// binary builds cmd/lock-agent with -race once per test process, unless
// scripts/test built it (prebuilt).
func binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		if binPath = prebuilt("lock-agent-race"); binPath != "" {
			return
		}
		dir, err := os.MkdirTemp("", "lock-agent-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "lock-agent")
		out, err := exec.Command("go", "build", "-race", "-o", binPath, "../cmd/lock-agent").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("%v: %s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

func TestBinaryValidate(t *testing.T) {
	t.Parallel() // see TestMain
	bin := binary(t)
	out, err := exec.Command(bin, "validate", "-config", "../agent.hcl").CombinedOutput()
	if exitCode(err) != 0 || !strings.Contains(string(out), "valid (3 masters, quorum 2") || strings.Contains(string(out), "warning") {
		t.Fatalf("sample config: exit %d: %s", exitCode(err), out)
	}
	// A deprecated setting is valid, and named with what replaced it (an
	// operator who capped holds with it learns that it caps nothing).
	old := filepath.Join(t.TempDir(), "old.hcl")
	os.WriteFile(old, []byte("redis \"a\" { address = \"h:1\" }\nlock {\n  max_ttl = \"2s\"\n}\n"), 0o600)
	out, err = exec.Command(bin, "validate", "-config", old).CombinedOutput()
	if exitCode(err) != 0 || !strings.Contains(string(out), "old.hcl:3: lock.max_ttl is deprecated, accepted and ignored: ttl= goes from 50ms to 30 days") {
		t.Fatalf("a deprecated setting: exit %d: %s", exitCode(err), out)
	}
	bad := filepath.Join(t.TempDir(), "bad.hcl")
	os.WriteFile(bad, []byte("redis \"a\" { address = \"h:1\" }\nlock {\n  leese = \"1s\"\n  drift_factor = 2\n}\n"), 0o600)
	out, err = exec.Command(bin, "validate", "-config", bad).CombinedOutput()
	if exitCode(err) != 2 || !strings.Contains(string(out), "bad.hcl:3") || !strings.Contains(string(out), `Did you mean "lease"`) ||
		!strings.Contains(string(out), "bad.hcl:4: Invalid lock.drift_factor") { // every error in one run
		t.Fatalf("bad config: exit %d: %s", exitCode(err), out)
	}
	// A usage error is 64 (EX_USAGE), an invalid config 2: every command alike.
	if _, err := exec.Command(bin, "validate").CombinedOutput(); exitCode(err) != 64 {
		t.Fatalf("validate without -config: exit %d", exitCode(err))
	}
	if _, err := exec.Command(bin, "frobnicate").CombinedOutput(); exitCode(err) != 64 {
		t.Fatalf("unknown command: exit %d", exitCode(err))
	}
	if out, err := exec.Command(bin, "version").CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "lock-agent ") {
		t.Fatalf("version: %s %v", out, err)
	}
}

// TestBinarySIGTERMReleasesEverything runs the real binary over real masters,
// takes holds, and stops it with SIGTERM: clients hear LOST and BYE, every
// hold is gone from Redis, and the exit code is 0.
func TestBinarySIGTERMReleasesEverything(t *testing.T) {
	bin := binary(t)
	servers := redistest.Start(t, 3)
	dir := t.TempDir()
	sock := filepath.Join(dir, "agent.sock")
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "agent { id = \"e2e\" }\nsocket { path = %q }\n", sock)
	for i, s := range servers {
		fmt.Fprintf(&cfg, "redis \"m%d\" { address = %q }\n", i, s.Addr)
	}
	cfgPath := filepath.Join(dir, "agent.hcl")
	os.WriteFile(cfgPath, []byte(cfg.String()), 0o600)
	bootstrap(t, bin, cfgPath)

	cmd := exec.Command(bin, "run", "-config", cfgPath)
	cmd.Env = append(os.Environ(), raceNoExitSleep)
	var logs syncBuffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	waitForListener(t, sock)
	c := agenttest.Dial(t, sock)
	var r agenttest.Reply
	lockagenttest.Eventually(t, 5*time.Second, func() bool { r = c.Do("LOCK e2e/one wait=1s"); return r.Kind == "OK" },
		"lock: %s\n%s", &r.Line, &logs)
	if r := c.Do("LOCK e2e/two owner=x"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	held := 0
	for _, s := range servers {
		held += s.Keys("lock-agent:{e2e/*}:h:*")
	}
	if held < 4 {
		t.Fatalf("only %d holder keys in the masters", held)
	}
	start := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if exitCode(err) != 0 {
			t.Fatalf("exit %d after SIGTERM\n%s", exitCode(err), logs.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("still running 5s after SIGTERM\n%s", logs.String())
	}
	took := time.Since(start)
	if took > time.Second {
		t.Fatalf("took %v to stop with two holds", took)
	}
	t.Logf("released everything and exited 0 %v after SIGTERM", took)
	var pushes []string
	for p := c.Push(time.Second); p != ""; p = c.Push(50 * time.Millisecond) {
		pushes = append(pushes, p)
	}
	got := strings.Join(pushes, "\n")
	if strings.Count(got, "reason=shutdown") != 3 || !strings.Contains(got, "* LOST e2e/one") || !strings.Contains(got, "* LOST e2e/two owner=x") {
		t.Fatalf("pushes:\n%s", got)
	}
	for _, s := range servers {
		if n := s.Keys("lock-agent:{e2e/*}:h:*"); n != 0 {
			t.Fatalf("%d holder keys left on %s after SIGTERM", n, s.Addr)
		}
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Fatal("socket left behind")
	}
}

// TestBinaryDevMode is the README's quickstart: `lock-agent run -dev`
// prints its socket and serves locks with no Redis installed.
func TestBinaryDevMode(t *testing.T) {
	bin := binary(t)
	cmd := exec.Command(bin, "run", "-dev")
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+shortTempDir(t), raceNoExitSleep)
	var logs syncBuffer
	cmd.Stderr = &logs
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var sock string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "export LOCK_AGENT_SOCKET="); ok {
			sock = v
			break
		}
	}
	if sock == "" {
		t.Fatal("dev mode printed no socket")
	}
	c := agenttest.Dial(t, sock)
	var r agenttest.Reply
	// A wait long enough for a round on a starved host: at load 25-33 a
	// round over the embedded masters (in the agent's process, under -race)
	// took more than the 1s each try once had, and a wait that runs out is
	// BUSY (protocol-v1), though the name is free ("dev lock: 5 BUSY").
	lockagenttest.Eventually(t, 30*time.Second, func() bool { r = c.Do("LOCK dev wait=10s"); return r.Kind == "OK" }, "dev lock: %s", &r.Line)
	if r := c.Do("HELLO client=e2e"); r.Fields["masters"] != "3" || r.Fields["quorum"] != "2" {
		t.Fatalf("hello: %s", r.Line)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); exitCode(err) != 0 {
		t.Fatalf("dev mode exit %d", exitCode(err))
	}
	// The embedded masters must outlive the agent's final releases.
	if strings.Contains(logs.String(), "release reached no master") {
		t.Fatalf("holds were not released before the dev masters stopped:\n%s", logs.String())
	}
}

// syncBuffer is a bytes.Buffer safe to write from a process pipe and read from the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func waitForSocket(t testing.TB, path string) {
	t.Helper()
	lockagenttest.Eventually(t, 10*time.Second, func() bool {
		fi, err := os.Stat(path)
		return err == nil && fi.Mode()&os.ModeSocket != 0
	}, "no socket at %s", path)
}

// shortTempDir is a temporary directory with a short path: Unix socket paths
// are limited to 108 bytes.
func shortTempDir(t testing.TB) string {
	dir, err := os.MkdirTemp("", "la")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// TestBinaryStopsWithin5sWithMastersPaused: a hold whose release cannot
// reach any master does not keep a stopping agent past 5s, even with a long
// master_timeout (its lease expires in the masters instead).
func TestBinaryStopsWithin5sWithMastersPaused(t *testing.T) {
	cmd, c, servers := pausedMastersAgent(t, "500ms")
	c.Do("PING")
	for _, s := range servers {
		s.Pause()
	}
	start := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); exitCode(err) != 0 {
		t.Fatalf("exit %d", exitCode(err))
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("took %v to stop", took)
	} else {
		t.Logf("stopped in %v with every master paused", took)
	}
}

// pausedMastersAgent runs the binary over three masters with the given
// master_timeout and a lock held by the returned connection.
func pausedMastersAgent(t *testing.T, masterTimeout string) (*exec.Cmd, *agenttest.Conn, []*redistest.Server) {
	bin := binary(t)
	servers := redistest.Start(t, 3)
	t.Cleanup(func() {
		for _, s := range servers {
			s.Resume()
		}
	})
	dir := t.TempDir()
	sock := filepath.Join(dir, "agent.sock")
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "socket { path = %q }\nlock { master_timeout = %q }\n", sock, masterTimeout)
	for i, s := range servers {
		fmt.Fprintf(&cfg, "redis \"m%d\" { address = %q }\n", i, s.Addr)
	}
	cfgPath := filepath.Join(dir, "agent.hcl")
	os.WriteFile(cfgPath, []byte(cfg.String()), 0o600)
	bootstrap(t, bin, cfgPath)
	cmd := exec.Command(bin, "run", "-config", cfgPath)
	cmd.Env = append(os.Environ(), raceNoExitSleep)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	waitForListener(t, sock)
	c := agenttest.Dial(t, sock)
	lockagenttest.Eventually(t, 5*time.Second, func() bool { return c.Do("LOCK slow wait=1s").Kind == "OK" }, "could not lock")
	return cmd, c, servers
}

// TestBinarySecondSignalExitsAtOnce: with every master paused, releasing
// on shutdown has to wait out its deadlines; a second SIGTERM ends the
// process at once, with exit code 1.
func TestBinarySecondSignalExitsAtOnce(t *testing.T) {
	cmd, _, servers := pausedMastersAgent(t, "200ms")
	for _, s := range servers {
		s.Pause()
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		t.Fatalf("the first signal's shutdown did not wait for the paused masters (exit %d)", exitCode(err))
	case <-time.After(150 * time.Millisecond):
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		if exitCode(err) != 1 {
			t.Fatalf("exit %d after a second signal, want 1", exitCode(err))
		}
	case <-time.After(time.Second):
		t.Fatal("still running 1s after a second signal")
	}
}
