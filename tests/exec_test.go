package tests

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
	"golang.org/x/sys/unix"
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
	code, out, errOut := lockAgent(t, "exec", "-socket", sock, "jobs/env", "--", "sh", "-c", `echo "$LOCK_AGENT_NAME $LOCK_AGENT_FENCE"; test -S /proc/self/fd/$LOCK_AGENT_FD || test "$(readlink /proc/$$/fd/$LOCK_AGENT_FD | cut -c1-7)" = socket`)
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
	if code, _, errOut := lockAgent(t, "exec", "-socket", sock, "-limit", "2", "-shared", "jobs/shared", "--", "true"); code != 1 || !strings.Contains(errOut, "limit") {
		t.Fatalf("-shared with -limit 2: exit %d %q", code, errOut)
	}
	if code, _, _ := lockAgent(t, "exec", "-socket", sock, "jobs/x"); code != 64 {
		t.Fatalf("no command: exit %d, want 64 (EX_USAGE, as flock)", code)
	}
	if code, _, errOut := lockAgent(t, "exec", "-socket", filepath.Join(t.TempDir(), "nope"), "jobs/x", "--", "true"); code != 1 || !strings.Contains(errOut, "no agent answers at") || !strings.Contains(errOut, "lock-agent run -dev") {
		t.Fatalf("no agent: exit %d %q", code, errOut)
	}
}

func TestExecStopsTheChildWhenTheLockIsLost(t *testing.T) {
	a, _, _ := twoAgents(t, 3*time.Second)
	sock := a.Config.Socket.Path
	start := time.Now()
	code, _, errOut := lockAgent(t, "exec", "-socket", sock, "-ttl", "300ms", "jobs/lost", "--", "sleep", "30")
	// Well under the 30s the child would run: a busy host took up to 6.2s
	// for the 0.3s ttl (the bound was 3s).
	if took := time.Since(start); code == 0 || took > 15*time.Second || !strings.Contains(errOut, "lost: expired") {
		t.Fatalf("exit %d after %v: %q", code, took, errOut)
	}
	// A child that ignores SIGTERM is killed after -kill-after, with what
	// it started: here a background sleep that holds the output pipe open,
	// so the run would last 30s if it survived.
	start = time.Now()
	code, _, errOut = lockAgent(t, "exec", "-socket", sock, "-ttl", "300ms", "-kill-after", "300ms", "jobs/stubborn", "--",
		"sh", "-c", `trap "" TERM; sleep 30 & wait; sleep 30`)
	// Likewise: a busy host took 3.6s for the 0.6s of ttl and kill-after.
	if took := time.Since(start); code == 0 || took > 15*time.Second || !strings.Contains(errOut, "killing it") {
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
	lockagenttest.Eventually(t, 5*time.Second, func() bool { return strings.Contains(out.String(), "ready") }, "child never started")
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
	if code != 0 || !strings.Contains(out, "3/3 masters up (quorum 2, tolerates 1 down, ok)") || !strings.Contains(out, "MASTER") || !strings.Contains(out, "agent host-a ") {
		t.Fatalf("status: exit %d\n%s", code, out)
	}
	code, out, _ = lockAgent(t, "status", "-socket", sock, "-json")
	var st struct {
		ID      string
		Quorum  int
		Masters []struct{ State string }
	}
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.Quorum != 2 || len(st.Masters) != 3 || st.ID != "host-a" {
		t.Fatalf("status -json: exit %d\n%s", code, out)
	}
	code, out, _ = lockAgent(t, "who", "-socket", sock, "ops/blocker")
	if code != 0 || !strings.Contains(out, "host-a") || !strings.Contains(out, "batch") || !strings.Contains(out, strconv.Itoa(os.Getpid())) {
		t.Fatalf("who: exit %d\n%s", code, out)
	}
	// WHO reads the masters: on a busy host a read may time out (exit 1,
	// NO_QUORUM) and be asked again.
	lockagenttest.Eventually(t, 10*time.Second, func() bool {
		code, out, _ = lockAgent(t, "who", "-socket", sock, "-json", "ops/blocker")
		return code != 1
	}, "who -json: exit 1 for 10s")
	var who struct {
		Name    string
		Holders []struct {
			PID   int
			Owner string
		}
		Queued *int // left out: no one waits here
	}
	if code != 0 || json.Unmarshal([]byte(out), &who) != nil || who.Name != "ops/blocker" || len(who.Holders) != 1 ||
		who.Holders[0].PID != os.Getpid() || (who.Queued != nil && *who.Queued != 0) {
		t.Fatalf("who -json: exit %d\n%s", code, out)
	}
	if code, out, _ := lockAgent(t, "who", "-socket", sock, "ops/free"); code != 0 || !strings.Contains(out, "is free") {
		t.Fatalf("who of a free name: exit %d\n%s", code, out)
	}
}

// waitForFile waits until path exists with content, and returns it.
func waitForFile(t *testing.T, path string) string {
	t.Helper()
	var b []byte
	lockagenttest.Eventually(t, 10*time.Second, func() bool {
		b, _ = os.ReadFile(path)
		return len(b) > 0 && b[len(b)-1] == '\n'
	}, "nothing written to %s", path)
	return strings.TrimSpace(string(b))
}

// alive tells whether process pid exists (and is not a zombie).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

// lockIsFreeWithin tries `exec -n NAME -- true` until it runs, within d.
func lockIsFreeWithin(t *testing.T, sock, name string, d time.Duration) bool {
	t.Helper()
	return pollFor(d, 20*time.Millisecond, func() bool {
		code, _, _ := lockAgent(t, "exec", "-socket", sock, "-wait", "0", "-conflict-exit", "75", name, "--", "true")
		return code == 0
	})
}

// TestExecKeepsTheLockWhileTheCommandRunsAfterExecIsKilled: like flock(1),
// the lock belongs to the descriptor the command inherited, so kill -9 of
// exec does not free it while its command still runs; the command's end
// does.
func TestExecKeepsTheLockWhileTheCommandRunsAfterExecIsKilled(t *testing.T) {
	t.Parallel()
	a, _, _ := twoAgents(t, 3*time.Second)
	sock := a.Config.Socket.Path
	pidFile := filepath.Join(t.TempDir(), "pid")
	// -kill-after 1s: the end of a command exec no longer watches is
	// unclean, so exec's lock-delay (-kill-after + 1s) follows it.
	cmd := exec.Command(binary(t), "exec", "-socket", sock, "-kill-after", "1s", "jobs/killed", "--", "sh", "-c", `echo $$ > `+pidFile+`; exec sleep 30`)
	cmd.Env = append(os.Environ(), raceNoExitSleep)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(waitForFile(t, pidFile))
	defer syscall.Kill(pid, syscall.SIGKILL)
	cmd.Process.Kill()
	cmd.Wait()
	time.Sleep(200 * time.Millisecond) // what the agent would need to release it
	if code, _, errOut := lockAgent(t, "exec", "-socket", sock, "-wait", "0", "jobs/killed", "--", "true"); code != 1 || !strings.Contains(errOut, "busy") {
		t.Fatalf("exec was killed while its command runs, and a second exec ran: exit %d %q", code, errOut)
	}
	syscall.Kill(pid, syscall.SIGKILL)
	if !lockIsFreeWithin(t, sock, "jobs/killed", 2*time.Second+3*time.Second) {
		t.Fatal("the lock was not released when the command ended")
	}
}

// TestExecKeepsTheLockWhileABackgroundJobRuns: a command that leaves a job
// running in the background leaves it the lock, as flock(1) does.
func TestExecKeepsTheLockWhileABackgroundJobRuns(t *testing.T) {
	t.Parallel()
	a, _, _ := twoAgents(t, 3*time.Second)
	sock := a.Config.Socket.Path
	pidFile := filepath.Join(t.TempDir(), "pid")
	// -kill-after 1s: the background job's end is unclean (no UNLOCK), so
	// exec's lock-delay (-kill-after + 1s) follows it.
	code, _, errOut := lockAgent(t, "exec", "-socket", sock, "-kill-after", "1s", "jobs/background", "--", "sh", "-c", `sleep 30 >/dev/null 2>&1 & echo $! > `+pidFile)
	if code != 0 {
		t.Fatalf("exit %d %q", code, errOut)
	}
	pid, _ := strconv.Atoi(waitForFile(t, pidFile))
	defer syscall.Kill(pid, syscall.SIGKILL)
	time.Sleep(200 * time.Millisecond) // time for a wrong release to show
	if code, _, errOut := lockAgent(t, "exec", "-socket", sock, "-wait", "0", "jobs/background", "--", "true"); code != 1 || !strings.Contains(errOut, "busy") {
		t.Fatalf("a second exec ran beside the first one's background job: exit %d %q", code, errOut)
	}
	syscall.Kill(pid, syscall.SIGKILL)
	if !lockIsFreeWithin(t, sock, "jobs/background", 2*time.Second+3*time.Second) {
		t.Fatal("the lock was not released when the background job ended")
	}
}

// TestExecReleasesBeforeItExits: with nothing left running, the lock is
// free by the time exec has exited, so back-to-back runs never see it busy.
func TestExecReleasesBeforeItExits(t *testing.T) {
	a, _, _ := twoAgents(t, 3*time.Second)
	for i := range 5 {
		if code, _, errOut := lockAgent(t, "exec", "-socket", a.Config.Socket.Path, "-wait", "0", "jobs/again", "--", "true"); code != 0 {
			t.Fatalf("run %d: exit %d %q", i, code, errOut)
		}
	}
}

// TestExecLossStopsTheWholeJob: after a loss nothing the command started
// outlives the lock, and exec exits 124.
func TestExecLossStopsTheWholeJob(t *testing.T) {
	t.Parallel() // see TestMain
	a, _, _ := twoAgents(t, 3*time.Second)
	pidFile := filepath.Join(t.TempDir(), "pid")
	code, _, errOut := lockAgent(t, "exec", "-socket", a.Config.Socket.Path, "-ttl", "300ms", "-kill-after", "300ms", "jobs/whole", "--",
		"sh", "-c", `sh -c 'trap "" TERM; exec sleep 30' >/dev/null 2>&1 & echo $! > `+pidFile+`; sleep 30`)
	if code != 124 || !strings.Contains(errOut, "lost") {
		t.Fatalf("exit %d, want 124: %q", code, errOut)
	}
	pid, _ := strconv.Atoi(waitForFile(t, pidFile))
	if alive(pid) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatal("the job's background process outlived the lost lock")
	}
	if code, _, errOut := lockAgent(t, "exec", "-socket", a.Config.Socket.Path, "-ttl", "300ms", "-quiet", "jobs/quiet", "--", "sleep", "30"); code != 124 || errOut != "" {
		t.Fatalf("-quiet loss: exit %d %q", code, errOut)
	}
}

// TestExecCommandLine: flock's habits work (-w in seconds, -n, -E, flags
// after NAME, -c), and a busy lock with -conflict-exit 0 prints nothing.
func TestExecCommandLine(t *testing.T) {
	a, _, _ := twoAgents(t, 3*time.Second)
	sock := a.Config.Socket.Path
	holder := agenttest.Dial(t, sock)
	holder.Do("LOCK jobs/held")

	start := time.Now()
	code, out, errOut := lockAgent(t, "exec", "-socket", sock, "-w", "0.4", "jobs/held", "--", "echo", "ran")
	if took := time.Since(start); code != 1 || out != "" || took < 400*time.Millisecond || !strings.Contains(errOut, "busy") {
		t.Fatalf("-w 0.4 (seconds): exit %d after %v, %q %q", code, took, out, errOut)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		out  string
	}{
		{"flags after NAME are flags", []string{"jobs/after", "-wait", "5", "--", "echo", "ran"}, 0, "ran\n"},
		{"a flag after NAME without --", []string{"jobs/after", "-n", "echo", "ran"}, 0, "ran\n"},
		{"-c runs a shell string", []string{"jobs/shell", "-c", "echo $LOCK_AGENT_NAME"}, 0, "jobs/shell\n"},
		{"-E sets the busy status", []string{"-n", "-E", "75", "jobs/held", "echo", "ran"}, 75, ""},
		{"the command's own flags are its own", []string{"jobs/own", "--", "sh", "-c", `printf "%s\n" "$0"`, "-n"}, 0, "-n\n"},
	} {
		code, out, errOut := lockAgent(t, append([]string{"exec", "-socket", sock}, tc.args...)...)
		if code != tc.code || out != tc.out {
			t.Errorf("%s: exit %d %q %q, want %d %q", tc.name, code, out, errOut, tc.code, tc.out)
		}
	}
	if code, out, errOut := lockAgent(t, "exec", "-socket", sock, "-wait", "0", "-conflict-exit", "0", "jobs/held", "--", "echo", "ran"); code != 0 || out != "" || errOut != "" {
		t.Errorf("-conflict-exit 0 must be silent (cron mails output): exit %d %q %q", code, out, errOut)
	}
	if code, out, _ := lockAgent(t, "exec", "-h"); code != 0 || !strings.Contains(out, "-wait D") || strings.Contains(out, "-1ns") || !strings.Contains(out, "124") {
		t.Errorf("exec -h: exit %d\n%s", code, out)
	}
	for _, bad := range [][]string{{"jobs/x", "-wait", "soon", "--", "true"}, {"jobs/x", "-c", "true", "extra"}, {"-n"}} {
		if code, _, _ := lockAgent(t, append([]string{"exec", "-socket", sock}, bad...)...); code != 64 {
			t.Errorf("exec %q: exit %d, want 64", bad, code)
		}
	}
}

// openPTY returns a new pseudo-terminal's controlling side and terminal.
func openPTY(t *testing.T) (ptm, pts *os.File) {
	t.Helper()
	ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	t.Cleanup(func() { ptm.Close() })
	if err := unix.IoctlSetPointerInt(int(ptm.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(ptm.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	pts, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pts.Close() })
	go io.Copy(io.Discard, ptm) // the terminal's output must not fill up
	return ptm, pts
}

// TestExecCtrlCReachesTheCommandOnce runs exec on a terminal, as a shell
// would (its own session, the foreground): each ^C reaches the command once,
// not once from the terminal and again forwarded by exec.
func TestExecCtrlCReachesTheCommandOnce(t *testing.T) {
	a, _, _ := twoAgents(t, 3*time.Second)
	ptm, pts := openPTY(t)
	dir := t.TempDir()
	ints, ready := filepath.Join(dir, "ints"), filepath.Join(dir, "ready")
	cmd := exec.Command(binary(t), "exec", "-socket", a.Config.Socket.Path, "jobs/tty", "--", "sh", "-c",
		`trap 'echo INT >> `+ints+`' INT; echo yes > `+ready+`; while :; do sleep 0.05 & wait $!; done`)
	cmd.Env = append(os.Environ(), raceNoExitSleep)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pts, pts, pts
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	waitForFile(t, ready)
	const presses = 5
	count := func() int { b, _ := os.ReadFile(ints); return strings.Count(string(b), "INT") }
	for i := range presses {
		ptm.Write([]byte{3}) // ^C
		lockagenttest.Eventually(t, 5*time.Second, func() bool { return count() > i }, "^C %d never reached the command", i+1)
		time.Sleep(100 * time.Millisecond) // time for a second delivery to show
	}
	if n := count(); n != presses {
		t.Errorf("%d ^C reached the command %d times", presses, n)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); exitCode(err) != 128+int(syscall.SIGTERM) {
		t.Fatalf("exit %d after SIGTERM, want 143", exitCode(err))
	}
}

// TestStatusWithoutQuorumFails: status exits 3 when the agent answers but
// fewer than a quorum of its masters are up, so scripts and health checks
// can tell.
func TestStatusWithoutQuorumFails(t *testing.T) {
	servers := redistest.Start(t, 3)
	cfg := agenttest.Config(t, servers, 3*time.Second)
	cfg.AgentID = "lonely"
	a := agenttest.StartNoWait(t, cfg)
	for _, s := range servers[:2] {
		s.Stop()
	}
	agenttest.Dial(t, a.Config.Socket.Path).AwaitMasters("up", 1)
	code, out, _ := lockAgent(t, "status", "-socket", a.Config.Socket.Path)
	if code != 3 || !strings.Contains(out, "1/3 masters up (quorum 2, tolerates 1 down, NO QUORUM)") || !strings.Contains(out, "agent lonely ") {
		t.Fatalf("status without quorum: exit %d, want 3\n%s", code, out)
	}
	if code, out, _ := lockAgent(t, "status", "-socket", a.Config.Socket.Path, "-json"); code != 3 || !strings.Contains(out, `"id": "lonely"`) {
		t.Fatalf("status -json without quorum: exit %d, want 3\n%s", code, out)
	}
}

// TestExecFollowsCtrlZAndFg runs exec under a job-control shell on a
// terminal: ^Z stops the command and exec (the shell sees the job
// stopped), fg resumes both with the command in the foreground, where ^C
// still reaches it once.
func TestExecFollowsCtrlZAndFg(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("needs bash for job control")
	}
	a, _, _ := twoAgents(t, 3*time.Second)
	ptm, pts := openPTY(t)
	dir := t.TempDir()
	file := func(name string) string { return filepath.Join(dir, name) }
	job := `trap 'echo INT >> ` + file("ints") + `' INT; echo $PPID > ` + file("exec") + `; while :; do echo tick >> ` + file("ticks") + `; sleep 0.05 & wait $!; done`
	shell := `set -m; ` + binary(t) + ` exec -socket ` + a.Config.Socket.Path + ` jobs/fg -c '` + strings.ReplaceAll(job, `'`, `'\''`) + `'
echo stopped > ` + file("stopped") + `
fg
echo "done $?" > ` + file("done")
	cmd := exec.Command("bash", "-c", shell)
	cmd.Env = append(os.Environ(), raceNoExitSleep)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pts, pts, pts
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	execPID, _ := strconv.Atoi(waitForFile(t, file("exec")))
	defer syscall.Kill(execPID, syscall.SIGKILL)
	ticks := func() int { b, _ := os.ReadFile(file("ticks")); return strings.Count(string(b), "tick") }

	ptm.Write([]byte{26}) // ^Z
	waitForFile(t, file("stopped"))
	// fg: the job runs again.
	before := ticks()
	lockagenttest.Eventually(t, 5*time.Second, func() bool { return ticks() >= before+3 }, "the command did not run again after fg")
	ptm.Write([]byte{3})               // ^C, to the command in the foreground again
	time.Sleep(300 * time.Millisecond) // time for it, and for a wrong second one, to show
	if b, _ := os.ReadFile(file("ints")); strings.Count(string(b), "INT") != 1 {
		t.Fatalf("after fg, one ^C reached the command %d times", strings.Count(string(b), "INT"))
	}
	syscall.Kill(execPID, syscall.SIGTERM)
	if got := waitForFile(t, file("done")); got != "done 143" {
		t.Fatalf("exec after SIGTERM: %q, want done 143", got)
	}
	cmd.Wait()
}

// TestExecScriptThatLocksItself runs the README's idiom: a script that runs
// itself again under exec. One copy runs; a second one finds it busy.
func TestExecScriptThatLocksItself(t *testing.T) {
	a, _, _ := twoAgents(t, 3*time.Second)
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var guard string
	for _, line := range strings.Split(string(readme), "\n") {
		if strings.Contains(line, `[ "$LOCK_AGENT_NAME" = jobs/sync ]`) {
			guard = line
		}
	}
	if guard == "" {
		t.Fatal("no self-locking script in the README")
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "sync")
	os.WriteFile(script, []byte("#!/bin/sh\n"+guard+"\necho \"locked $LOCK_AGENT_FENCE $1\"\nsleep ${2:-0}\n"), 0o755)
	run := func(args ...string) *exec.Cmd {
		cmd := exec.Command(script, args...)
		cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(binary(t))+":"+os.Getenv("PATH"),
			"LOCK_AGENT_SOCKET="+a.Config.Socket.Path, raceNoExitSleep)
		return cmd
	}
	if out, err := run("first").CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "locked ") || !strings.HasSuffix(string(out), " first\n") {
		t.Fatalf("exit %d: %q", exitCode(err), out)
	}
	long := run("long", "30")
	var out syncBuffer
	long.Stdout = &out
	if err := long.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { long.Process.Signal(syscall.SIGTERM); long.Wait() }()
	lockagenttest.Eventually(t, 5*time.Second, func() bool { return strings.Contains(out.String(), "locked") }, "the long run never locked")
	if out, err := run("second").CombinedOutput(); exitCode(err) != 1 || !strings.Contains(string(out), "busy") {
		t.Fatalf("a second copy while the first runs: exit %d %q", exitCode(err), out)
	}
}

// TestExecSharedAndSemaphore: exec takes a read hold or a semaphore slot,
// and tells the command its slot.
func TestExecSharedAndSemaphore(t *testing.T) {
	a, _, _ := twoAgents(t, 3*time.Second)
	sock := a.Config.Socket.Path
	c := agenttest.Dial(t, sock)
	if r := c.Do("LOCK jobs/rw mode=shared"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	if code, _, errOut := lockAgent(t, "exec", "-socket", sock, "-shared", "-w", "0", "jobs/rw", "--", "true"); code != 0 {
		t.Fatalf("a shared exec beside a reader: exit %d, %s", code, errOut)
	}
	if code, _, _ := lockAgent(t, "exec", "-socket", sock, "-w", "0", "jobs/rw", "--", "true"); code != 1 {
		t.Fatalf("an exclusive exec beside a reader: exit %d, want 1 (busy)", code)
	}
	if r := c.Do("LOCK jobs/sem limit=2"); r.Fields["slot"] != "1" {
		t.Fatal(r.Line)
	}
	code, out, errOut := lockAgent(t, "exec", "-socket", sock, "-limit", "2", "jobs/sem", "--", "sh", "-c", `echo "$LOCK_AGENT_SLOT"`)
	if code != 0 || strings.TrimSpace(out) != "2" {
		t.Fatalf("exec -limit 2 with slot 1 taken: exit %d, out %q, err %q", code, out, errOut)
	}
	// -limit applies to every name; the slots come in the order given.
	code, out, errOut = lockAgent(t, "exec", "-socket", sock, "-limit", "2", "jobs/sem2,jobs/sem", "--", "sh", "-c", `echo "$LOCK_AGENT_SLOT"`)
	if code != 0 || strings.TrimSpace(out) != "1,2" {
		t.Fatalf("exec -limit 2 of a free semaphore and one with slot 1 taken: exit %d, out %q, err %q, want 1,2", code, out, errOut)
	}
	// -shared too: beside a reader of jobs/rw, both names are read holds.
	if code, _, errOut := lockAgent(t, "exec", "-socket", sock, "-shared", "-w", "0", "jobs/rw2,jobs/rw", "--", "true"); code != 0 {
		t.Fatalf("a shared exec of two names beside a reader: exit %d, %s", code, errOut)
	}
	if code, _, _ := lockAgent(t, "exec", "-socket", sock, "-w", "0", "jobs/rw2,jobs/rw", "--", "true"); code != 1 {
		t.Fatalf("an exclusive exec of two names, one beside a reader: exit %d, want 1 (busy)", code)
	}
}

// runningExec is a `lock-agent exec` started in the background.
type runningExec struct {
	cmd    *exec.Cmd
	stderr syncBuffer
	done   chan struct{} // closed once exec has exited; err is set then
	err    error
}

// startExec starts `lock-agent exec ARGS...`; the test's end kills it.
func startExec(t *testing.T, args ...string) *runningExec {
	t.Helper()
	r := &runningExec{cmd: exec.Command(binary(t), append([]string{"exec"}, args...)...), done: make(chan struct{})}
	r.cmd.Env = append(os.Environ(), raceNoExitSleep)
	r.cmd.Stderr = &r.stderr
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { // the one Wait: a second one would wait for ever for the output copy
		r.err = r.cmd.Wait()
		close(r.done)
	}()
	t.Cleanup(func() {
		r.cmd.Process.Kill()
		<-r.done
	})
	return r
}

// exited waits up to d for exec to exit and returns its exit code, or -1.
func (r *runningExec) exited(d time.Duration) int {
	select {
	case <-r.done:
		return exitCode(r.err)
	case <-time.After(d):
		return -1
	}
}

// TestExecSeveralNames: NAME a,b takes both names in one LOCK; the command
// learns both fences; both are held while it runs, by exec's session, and
// both are free once exec has exited.
func TestExecSeveralNames(t *testing.T) {
	a, b, _ := twoAgents(t, 3*time.Second)
	sock := a.Config.Socket.Path
	dir := t.TempDir()
	envFile, goFile := filepath.Join(dir, "env"), filepath.Join(dir, "go")
	run := startExec(t, "-socket", sock, "jobs/m2,jobs/m1", "--", "sh", "-c",
		`echo "$LOCK_AGENT_NAME $LOCK_AGENT_FENCE $LOCK_AGENT_SLOT" > `+envFile+`; while [ ! -e `+goFile+` ]; do sleep 0.02; done`)
	env := strings.Fields(waitForFile(t, envFile))
	if len(env) != 3 || env[0] != "jobs/m2,jobs/m1" || env[2] != "0,0" {
		t.Fatalf("the command got %q, want NAME as given, two fences, two slots of 0", env)
	}
	fences := strings.Split(env[1], ",")
	if len(fences) != 2 {
		t.Fatalf("LOCK_AGENT_FENCE=%s, want two fences", env[1])
	}
	// Held, by exec, from this agent and from the other one.
	other := agenttest.Dial(t, b.Config.Socket.Path)
	for i, name := range []string{"jobs/m2", "jobs/m1"} {
		if r := other.Do("LOCK " + name + " wait=0"); r.Kind != "BUSY" {
			t.Fatalf("%s while exec runs: %s, want BUSY", name, r.Line)
		}
		code, out, _ := lockAgent(t, "who", "-socket", sock, "-json", name)
		var who struct {
			Holders []struct {
				PID   int
				Fence int64
			}
		}
		if code != 0 || json.Unmarshal([]byte(out), &who) != nil || len(who.Holders) != 1 ||
			who.Holders[0].PID != run.cmd.Process.Pid || strconv.FormatInt(who.Holders[0].Fence, 10) != fences[i] {
			t.Fatalf("who %s: exit %d, want exec (pid %d) holding it with fence %s:\n%s", name, code, run.cmd.Process.Pid, fences[i], out)
		}
	}
	os.WriteFile(goFile, nil, 0o644)
	if code := run.exited(10 * time.Second); code != 0 {
		t.Fatalf("exec: exit %d %s", code, run.stderr.String())
	}
	// exec waits for the release before it exits: both are free at once.
	for _, name := range []string{"jobs/m1", "jobs/m2"} {
		if r := other.Do("LOCK " + name + " wait=0"); r.Kind != "OK" {
			t.Fatalf("%s after exec: %s, want OK", name, r.Line)
		}
	}
}

// TestExecSeveralNamesAllOrNone: a multi-name exec that cannot get one of
// its names runs nothing and leaves every name free, the ones it held while
// it waited included.
func TestExecSeveralNamesAllOrNone(t *testing.T) {
	a, _, _ := twoAgents(t, 3*time.Second)
	sock := a.Config.Socket.Path
	holder := agenttest.Dial(t, sock)
	if r := holder.Do("LOCK jobs/n2"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	for _, wait := range []string{"0", "0.3"} {
		// Byte order: jobs/n1 is claimed first, and held while waiting for jobs/n2.
		code, out, errOut := lockAgent(t, "exec", "-socket", sock, "-w", wait, "jobs/n2,jobs/n1,jobs/n3", "--", "echo", "ran")
		if code != 1 || out != "" || !strings.Contains(errOut, "busy") {
			t.Fatalf("-w %s with jobs/n2 held: exit %d %q %q, want 1, busy, nothing run", wait, code, out, errOut)
		}
		for _, name := range []string{"jobs/n1", "jobs/n3"} {
			if r := holder.Do("LOCK " + name + " wait=0 owner=check"); r.Kind != "OK" {
				t.Fatalf("-w %s: %s after the busy exec: %s, want it free", wait, name, r.Line)
			}
			holder.Do("UNLOCK " + name + " owner=check")
		}
	}
	if code, _, errOut := lockAgent(t, "exec", "-socket", sock, "jobs/n1,,jobs/n3", "--", "true"); code != 64 || !strings.Contains(errOut, "empty name") {
		t.Fatalf("an empty name: exit %d %q, want 64", code, errOut)
	}
}

// TestExecLossOfOneOfSeveralNames: when one name of several is lost, exec
// stops the whole job as for one name (SIGTERM, SIGKILL after -kill-after)
// and exits 124; the other names are free afterwards.
func TestExecLossOfOneOfSeveralNames(t *testing.T) {
	a, _, servers := twoAgents(t, 3*time.Second)
	sock := a.Config.Socket.Path
	pidFile := filepath.Join(t.TempDir(), "pid")
	run := startExec(t, "-socket", sock, "-kill-after", "300ms", "jobs/l1,jobs/l2", "--",
		"sh", "-c", `trap "" TERM; echo $$ > `+pidFile+`; while :; do sleep 0.05; done`)
	pid, _ := strconv.Atoi(waitForFile(t, pidFile))
	defer syscall.Kill(pid, syscall.SIGKILL)
	// Take jobs/l2 away behind the agent's back: its next renewal finds a
	// majority of masters without it, and the agent pushes LOST revoked.
	for _, s := range servers {
		if _, err := s.Do("EVAL", "for _, k in ipairs(redis.call('KEYS', ARGV[1])) do redis.call('DEL', k) end return 0", "0", "lock-agent:{jobs/l2}:h:*"); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	code := run.exited(15 * time.Second)
	if errOut := run.stderr.String(); code != 124 || !strings.Contains(errOut, "jobs/l2 lost") || !strings.Contains(errOut, "killing it") {
		t.Fatalf("exit %d after %v, want 124 (-1: still running), jobs/l2 lost and the command killed: %q", code, time.Since(start), errOut)
	}
	if alive(pid) {
		t.Fatal("the command (which ignores SIGTERM) outlived the lost lock")
	}
	if !lockIsFreeWithin(t, sock, "jobs/l1", 3*time.Second) {
		t.Fatal("jobs/l1 stayed held after exec stopped")
	}
}
