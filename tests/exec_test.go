package tests

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/agenttest"
)

// lockAgent runs the binary with args and returns its exit code, stdout and stderr.
func lockAgent(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	cmd.Env = append(os.Environ(), raceNoExitSleep)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	return exitCode(err), out.String(), errOut.String()
}

func TestExecExitCodesAndEnvironment(t *testing.T) {
	a, _, _ := twoAgents(t, 3*time.Second)
	sock := a.Config.Socket.Path
	code, out, errOut := lockAgent(t, "exec", "-socket", sock, "jobs/env", "--", "sh", "-c", `echo "$LOCK_AGENT_NAME $LOCK_AGENT_FENCE"`)
	fields := strings.Fields(out)
	if code != 0 || len(fields) != 2 || fields[0] != "jobs/env" {
		t.Fatalf("exit %d, out %q, err %q", code, out, errOut)
	}
	if fence, err := strconv.Atoi(fields[1]); err != nil || fence < 1 {
		t.Fatalf("fence %q", fields[1])
	}
	if code, _, _ := lockAgent(t, "exec", "-socket", sock, "jobs/fail", "--", "sh", "-c", "exit 7"); code != 7 {
		t.Fatalf("child failure: exit %d, want 7", code)
	}
	if code, _, _ := lockAgent(t, "exec", "-socket", sock, "jobs/sig", "--", "sh", "-c", "kill -KILL $$"); code != 128+9 {
		t.Fatalf("child killed: exit %d, want 137", code)
	}
	if code, _, _ := lockAgent(t, "exec", "-socket", sock, "jobs/none", "--", "/nonexistent/cmd"); code != 127 {
		t.Fatalf("missing command: exit %d, want 127", code)
	}

	holder := agenttest.Dial(t, sock)
	holder.Do("LOCK jobs/busy")
	code, _, errOut = lockAgent(t, "exec", "-socket", sock, "-wait", "0", "jobs/busy", "--", "true")
	if code != 1 || !strings.Contains(errOut, "busy") {
		t.Fatalf("busy: exit %d %q", code, errOut)
	}
	if code, _, _ := lockAgent(t, "exec", "-socket", sock, "-wait", "100ms", "-conflict-exit", "75", "jobs/busy", "--", "true"); code != 75 {
		t.Fatalf("busy with -conflict-exit 75: exit %d", code)
	}
	if code, _, errOut := lockAgent(t, "exec", "-socket", sock, "-shared", "jobs/shared", "--", "true"); code != 1 || !strings.Contains(errOut, "not supported yet") {
		t.Fatalf("-shared: exit %d %q", code, errOut)
	}
	if code, _, _ := lockAgent(t, "exec", "-socket", sock, "jobs/x"); code != 2 {
		t.Fatalf("no command: exit %d, want 2", code)
	}
	if code, _, errOut := lockAgent(t, "exec", "-socket", filepath.Join(t.TempDir(), "nope"), "jobs/x", "--", "true"); code != 1 || !strings.Contains(errOut, "dial") {
		t.Fatalf("no agent: exit %d %q", code, errOut)
	}
}

func TestExecStopsTheChildWhenTheLockIsLost(t *testing.T) {
	a, _, _ := twoAgents(t, 3*time.Second)
	sock := a.Config.Socket.Path
	start := time.Now()
	code, _, errOut := lockAgent(t, "exec", "-socket", sock, "-ttl", "300ms", "jobs/lost", "--", "sleep", "30")
	if took := time.Since(start); code == 0 || took > 3*time.Second || !strings.Contains(errOut, "lost: expired") {
		t.Fatalf("exit %d after %v: %q", code, took, errOut)
	}
	// A child that ignores SIGTERM is killed after -kill-after, with what
	// it started: here a background sleep that holds the output pipe open,
	// so the run would last 30s if it survived.
	start = time.Now()
	code, _, errOut = lockAgent(t, "exec", "-socket", sock, "-ttl", "300ms", "-kill-after", "300ms", "jobs/stubborn", "--",
		"sh", "-c", `trap "" TERM; sleep 30 & wait; sleep 30`)
	if took := time.Since(start); code == 0 || took > 3*time.Second || !strings.Contains(errOut, "killing it") {
		t.Fatalf("exit %d after %v: %q", code, took, errOut)
	}
}

func TestExecForwardsSignals(t *testing.T) {
	a, _, _ := twoAgents(t, 3*time.Second)
	cmd := exec.Command(binary(t), "exec", "-socket", a.Config.Socket.Path, "jobs/signal", "--",
		"sh", "-c", `trap 'echo got-term; exit 3' TERM; echo ready; while :; do sleep 0.05; done`)
	cmd.Env = append(os.Environ(), raceNoExitSleep)
	var out syncBuffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(out.String(), "ready"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("child never started")
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	if exitCode(err) != 3 || !strings.Contains(out.String(), "got-term") {
		t.Fatalf("exit %d, out %q", exitCode(err), out.String())
	}
	// And the lock was released on the way out.
	c := agenttest.Dial(t, a.Config.Socket.Path)
	if r := c.Do("LOCK jobs/signal wait=0"); r.Kind != "OK" {
		t.Fatalf("lock left held: %s", r.Line)
	}
}

// TestExecGuardsAShellCommandAcrossTwoAgents runs the same guarded shell
// command from both agents at once: its runs never overlap.
func TestExecGuardsAShellCommandAcrossTwoAgents(t *testing.T) {
	a, b, _ := twoAgents(t, 3*time.Second)
	logFile := filepath.Join(t.TempDir(), "runs.log")
	script := `echo "start $LOCK_AGENT_FENCE" >> ` + logFile + `; sleep 0.05; echo "end $LOCK_AGENT_FENCE" >> ` + logFile
	var wg sync.WaitGroup
	for i := range 6 {
		sock := a.Config.Socket.Path
		if i%2 == 1 {
			sock = b.Config.Socket.Path
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code, _, errOut := lockAgent(t, "exec", "-socket", sock, "-wait", "20s", "cron/report", "--", "sh", "-c", script); code != 0 {
				t.Errorf("exec %d: exit %d %s", i, code, errOut)
			}
		}()
	}
	wg.Wait()
	data, _ := os.ReadFile(logFile)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 12 {
		t.Fatalf("log:\n%s", data)
	}
	for i := 0; i < len(lines); i += 2 {
		s, e := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if s[0] != "start" || e[0] != "end" || s[1] != e[1] {
			t.Fatalf("runs overlapped:\n%s", data)
		}
	}
}

func TestStatusAndWhoCommands(t *testing.T) {
	a, _, _ := twoAgents(t, 3*time.Second)
	sock := a.Config.Socket.Path
	c := agenttest.Dial(t, sock)
	c.Do("LOCK ops/blocker owner=batch")
	code, out, _ := lockAgent(t, "status", "-socket", sock)
	if code != 0 || !strings.Contains(out, "3/3 masters up (quorum 2, ok)") || !strings.Contains(out, "MASTER") {
		t.Fatalf("status: exit %d\n%s", code, out)
	}
	code, out, _ = lockAgent(t, "status", "-socket", sock, "-json")
	var st struct {
		Quorum  int
		Masters []struct{ State string }
	}
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.Quorum != 2 || len(st.Masters) != 3 {
		t.Fatalf("status -json: exit %d\n%s", code, out)
	}
	code, out, _ = lockAgent(t, "who", "-socket", sock, "ops/blocker")
	if code != 0 || !strings.Contains(out, "host-a") || !strings.Contains(out, "batch") || !strings.Contains(out, strconv.Itoa(os.Getpid())) {
		t.Fatalf("who: exit %d\n%s", code, out)
	}
	code, out, _ = lockAgent(t, "who", "-socket", sock, "-json", "ops/blocker")
	var holders []struct {
		PID   int
		Owner string
	}
	if code != 0 || json.Unmarshal([]byte(out), &holders) != nil || len(holders) != 1 || holders[0].PID != os.Getpid() {
		t.Fatalf("who -json: exit %d\n%s", code, out)
	}
	if code, out, _ := lockAgent(t, "who", "-socket", sock, "ops/free"); code != 0 || !strings.Contains(out, "is free") {
		t.Fatalf("who of a free name: exit %d\n%s", code, out)
	}
}
