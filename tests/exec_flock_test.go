package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/agenttest"
)

// The tests here run util-linux's own flock(1) test cases (tests/ts/flock:
// flock, close) against `lock-agent exec`, with flock's flags: `flock FILE`
// swapped for `lock-agent exec NAME` must keep every flag's meaning and
// exit status. Where flock waits ("sleep 3") these wait for an event.

// flockHolder is util-linux's "general lock": a command that holds NAME
// (with args, e.g. --shared) until released, writing Locking and Unlocking
// to out.
type flockHolder struct {
	cmd     *exec.Cmd
	release string
}

func holdLikeFlock(t *testing.T, sock, name, out string, args ...string) *flockHolder {
	t.Helper()
	release := filepath.Join(t.TempDir(), "release")
	script := `echo Locking >> ` + out + `; while [ ! -e ` + release + ` ]; do sleep 0.02; done; echo Unlocking >> ` + out
	argv := append(append([]string{"exec", "-socket", sock}, args...), name, "sh", "-c", script)
	cmd := exec.Command(binary(t), argv...)
	cmd.Env = append(os.Environ(), raceNoExitSleep)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitForFile(t, out) // "the lock should be established when flock has a child"
	return &flockHolder{cmd, release}
}

// stop releases the lock and returns the holder's exit status.
func (h *flockHolder) stop(t *testing.T) int {
	t.Helper()
	if err := os.WriteFile(h.release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return exitCode(h.cmd.Wait())
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

// TestExecFlockCases is util-linux's ts/flock/flock, flock(2) half: a
// --shared general lock, then each subtest's flags on exec, in order, each
// with its exit status and what it writes to the common output.
func TestExecFlockCases(t *testing.T) {
	t.Parallel() // its own masters and agents; judges no latency
	a, _, _ := twoAgents(t, 3*time.Second)
	sock := a.Config.Socket.Path
	out := filepath.Join(t.TempDir(), "output")
	const name = "flock/lockfile"
	general := holdLikeFlock(t, sock, name, out, "--shared")

	doLock := func(t *testing.T, flags string, want int, mesg string) {
		t.Helper()
		args := append(append([]string{"exec", "-socket", sock}, strings.Fields(flags)...), name, "sh", "-c", `echo "$0" >> `+out, mesg)
		if code, _, errOut := lockAgent(t, args...); code != want {
			t.Fatalf("exec %s: exit %d, want %d: %q", flags, code, want, errOut)
		}
	}
	t.Run("non-block", func(t *testing.T) { doLock(t, "--nonblock --conflict-exit-code 123", 123, "You will never see this!") })
	t.Run("no-fork", func(t *testing.T) {
		doLock(t, "--no-fork --nonblock --conflict-exit-code 123", 123, "You will never see this!")
	})
	t.Run("shared", func(t *testing.T) { doLock(t, "--shared", 0, "Have shared lock") })
	t.Run("exclusive", func(t *testing.T) {
		doLock(t, "--nonblock --exclusive --conflict-exit-code 123", 123, "You will never see this!")
	})
	t.Run("the manual's -w .007 runs out", func(t *testing.T) { doLock(t, "-w .007", 1, "You will never see this!") })
	t.Run("a --timeout that runs out takes --conflict-exit-code", func(t *testing.T) {
		doLock(t, "--timeout 0.3 --conflict-exit-code 5", 5, "You will never see this!")
	})
	t.Run("timeout", func(t *testing.T) {
		// flock's waits out the general lock's "sleep 3"; this one starts
		// waiting, and only then is the general lock released.
		waiter := agenttest.Dial(t, sock)
		done := make(chan int, 1)
		go func() {
			code, _, _ := lockAgent(t, "exec", "-socket", sock, "--timeout", "30", "--conflict-exit-code", "5", name, "sh", "-c", `echo "After timeout." >> `+out)
			done <- code
		}()
		waiter.AwaitWaiters(1)
		if code := general.stop(t); code != 0 {
			t.Fatalf("the general lock's exec: exit %d", code)
		}
		if code := <-done; code != 0 {
			t.Fatalf("exit %d, want 0", code)
		}
	})
	// The time check: what ran, in order. The exclusive "After timeout."
	// comes only after the general lock's "Unlocking".
	if got, want := readFile(t, out), "Locking\nHave shared lock\nUnlocking\nAfter timeout.\n"; got != want {
		t.Fatalf("output %q, want %q", got, want)
	}
}

// TestExecFlockClose is util-linux's ts/flock/close: under --close the
// command does not inherit the descriptor the lock is held on; without it,
// it does. For exec that descriptor is the agent connection (LOCK_AGENT_FD);
// and what --close is for: a background job the command leaves does not
// keep the lock.
func TestExecFlockClose(t *testing.T) {
	a, _, _ := twoAgents(t, 3*time.Second)
	sock := a.Config.Socket.Path
	const probe = `if [ -n "$LOCK_AGENT_FD" ] && [ -e /proc/self/fd/$LOCK_AGENT_FD ]; then echo inherited; else echo closed; fi`
	for _, tc := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--exclusive", "--close"}, "closed\n"},
		{[]string{"--exclusive"}, "inherited\n"},
		{[]string{"-o"}, "closed\n"},
	} {
		args := append(append([]string{"exec", "-socket", sock}, tc.flags...), "flock/close", "--command", probe)
		if code, out, errOut := lockAgent(t, args...); code != 0 || out != tc.want {
			t.Errorf("exec %s: exit %d %q %q, want %q", tc.flags, code, out, errOut, tc.want)
		}
	}

	// An exec -o whose command leaves a job behind: the lock is free by the
	// time exec exits (without -o the job would keep it: see
	// TestExecKeepsTheLockWhileABackgroundJobRuns).
	pidFile := filepath.Join(t.TempDir(), "pid")
	code, _, errOut := lockAgent(t, "exec", "-socket", sock, "-o", "flock/close-bg", "-c", `sleep 30 >/dev/null 2>&1 & echo $! > `+pidFile)
	if code != 0 {
		t.Fatalf("exit %d %q", code, errOut)
	}
	pid, _ := strconv.Atoi(waitForFile(t, pidFile))
	t.Cleanup(func() { killPid(pid) })
	if code, _, errOut := lockAgent(t, "exec", "-socket", sock, "-n", "flock/close-bg", "true"); code != 0 {
		t.Fatalf("the background job of an exec -o kept the lock: exit %d %q", code, errOut)
	}
	if !alive(pid) {
		t.Fatal("the background job is gone: the test proved nothing")
	}
}

// TestExecFlockNoFork: -F (--no-fork) makes exec the command itself (same
// pid, as flock's execvp), holding the lock through the inherited
// connection until it exits; its status is exec's.
func TestExecFlockNoFork(t *testing.T) {
	a, _, _ := twoAgents(t, 3*time.Second)
	sock := a.Config.Socket.Path
	dir := t.TempDir()
	pidFile, release := filepath.Join(dir, "pid"), filepath.Join(dir, "release")
	cmd := exec.Command(binary(t), "exec", "-socket", sock, "-F", "flock/nofork", "sh", "-c",
		`[ -n "$LOCK_AGENT_FD" ] && echo $$ > `+pidFile+`; while [ ! -e `+release+` ]; do sleep 0.02; done; exit 7`)
	cmd.Env = append(os.Environ(), raceNoExitSleep)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if pid := waitForFile(t, pidFile); pid != strconv.Itoa(cmd.Process.Pid) {
		t.Fatalf("the command runs as pid %s, exec was %d: it forked", pid, cmd.Process.Pid)
	}
	if code, _, errOut := lockAgent(t, "exec", "-socket", sock, "-n", "-E", "75", "flock/nofork", "true"); code != 75 {
		t.Fatalf("the lock is not held while the -F command runs: exit %d %q", code, errOut)
	}
	holders := agenttest.Dial(t, sock).Do("WHO flock/nofork")
	if len(holders.Data) == 0 || holders.Data[0]["pid"] != strconv.Itoa(cmd.Process.Pid) {
		t.Fatalf("WHO: %v, want the holder's pid %d", holders.Data, cmd.Process.Pid)
	}
	os.WriteFile(release, nil, 0o600)
	if code := exitCode(cmd.Wait()); code != 7 {
		t.Fatalf("exit %d, want the command's 7", code)
	}
	if !lockIsFreeWithin(t, sock, "flock/nofork", 5*time.Second) {
		t.Fatal("the lock outlived the -F command")
	}
	if code, _, _ := lockAgent(t, "exec", "-socket", sock, "-F", "flock/nofork", "no-such-command-xyz"); code != 127 {
		t.Fatalf("-F of a missing command: exit %d, want 127", code)
	}
}

// TestExecFlockNoForkSignals: under -F a signal to exec's pid is a signal
// to the command, which dies of it as if run directly (exec's own handlers
// are gone with its image), and the lock goes with it.
func TestExecFlockNoForkSignals(t *testing.T) {
	a, _, _ := twoAgents(t, 3*time.Second)
	sock := a.Config.Socket.Path
	cmd := exec.Command(binary(t), "exec", "-socket", sock, "-F", "flock/nofork-sig", "sleep", "30")
	cmd.Env = append(os.Environ(), raceNoExitSleep)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	who := agenttest.Dial(t, sock)
	lockagenttest.Eventually(t, 10*time.Second, func() bool {
		comm, _ := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/comm")
		return strings.TrimSpace(string(comm)) == "sleep" && len(who.Do("WHO flock/nofork-sig").Data) > 0
	}, "exec -F never became sleep holding the lock")
	cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Fatalf("the -F command did not die of SIGTERM: %v", err)
	}
	if !lockIsFreeWithin(t, sock, "flock/nofork-sig", 5*time.Second) {
		t.Fatal("the lock outlived the -F command")
	}
}

// TestExecFlockUsage: flock's usage errors exit 64 (EX_USAGE); -h and
// --help list flock's flags.
func TestExecFlockUsage(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock") // usage is refused before any dial
	for _, args := range [][]string{
		{"flock/x"},                            // no command
		{"--frob", "flock/x", "true"},          // an unknown flag
		{"-F", "-o", "flock/x", "true"},        // flock: incompatible
		{"-E", "256", "flock/x", "true"},       // flock: 0 to 255
		{"-w", "soon", "flock/x", "true"},      // not a number of seconds
		{"flock/x", "-c", "true", "extra"},     // -c takes exactly one command
		{"--n", "flock/x", "true"},             // ambiguous: --nb, --nonblock, --no-fork
		{"--timeout", "-1", "flock/x", "true"}, // negative
	} {
		if code, _, errOut := lockAgent(t, append([]string{"exec", "-socket", sock}, args...)...); code != 64 {
			t.Errorf("exec %q: exit %d, want 64: %q", args, code, errOut)
		}
	}
	for _, help := range []string{"-h", "--help"} {
		code, out, _ := lockAgent(t, "exec", help)
		for _, flag := range []string{"--exclusive", "--shared", "--nonblock", "--timeout", "--conflict-exit-code", "--command", "--close", "--no-fork", "--help"} {
			if code != 0 || !strings.Contains(out, flag) {
				t.Errorf("exec %s: exit %d, no %s in\n%s", help, code, flag, out)
			}
		}
	}
}

func killPid(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		p.Kill()
	}
}
