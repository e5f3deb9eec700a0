package tests

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	lockagent "github.com/lock-agent/lock-agent/clients/go"
	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/agenttest"
)

// startCLI starts `lock-agent ARGS...`; the test's end kills it.
func startCLI(t *testing.T, stdout *syncBuffer, args ...string) *runningExec {
	t.Helper()
	r := &runningExec{cmd: exec.Command(binary(t), args...), done: make(chan struct{})}
	r.cmd.Env = append(os.Environ(), raceNoExitSleep)
	r.cmd.Stderr = &r.stderr
	// A command that outlives its elect keeps the output pipes open: the
	// test's end kills it, but Wait must not wait for that.
	r.cmd.WaitDelay = time.Second
	if stdout != nil {
		r.cmd.Stdout = stdout
	}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		r.err = r.cmd.Wait()
		close(r.done)
	}()
	t.Cleanup(func() {
		r.cmd.Process.Kill()
		<-r.done
	})
	return r
}

// termsOf reads the candidates' log: one "ID FENCE PID" line per term begun.
func termsOf(t *testing.T, log string) [][]string {
	data, err := os.ReadFile(log)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var terms [][]string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if f := strings.Fields(line); len(f) == 3 {
			terms = append(terms, f)
		}
	}
	return terms
}

// TestElectRunsOnlyTheLeader: three candidates on two agents; only the
// elected one's command runs while the others wait in the queue; killing
// the leader's command (kill -9) elects the next in arrival order, with a
// greater term; SIGTERM to a leading elect reaches its command, and its exit
// status is elect's.
func TestElectRunsOnlyTheLeader(t *testing.T) {
	t.Parallel()
	a, b, _ := twoAgents(t, 3*time.Second)
	log := filepath.Join(t.TempDir(), "terms.log")
	script := `echo "$0 $LOCK_AGENT_FENCE $$" >> ` + log + `; trap 'exit 3' TERM; while :; do sleep 0.05; done`
	var candidates []*runningExec
	t.Cleanup(func() { // the commands lead their own process groups: elect's kill leaves them
		for _, term := range termsOf(t, log) {
			if pid, err := strconv.Atoi(term[2]); err == nil {
				syscall.Kill(-pid, syscall.SIGKILL)
			}
		}
	})
	watcher := agenttest.Dial(t, a.Config.Socket.Path)
	for i, sock := range []string{a.Config.Socket.Path, b.Config.Socket.Path, a.Config.Socket.Path} {
		candidates = append(candidates, startCLI(t, nil, "elect", "-socket", sock, "-value", "candidate "+strconv.Itoa(i),
			"svc/leader", "--", "sh", "-c", script, strconv.Itoa(i)))
		// Wait for each to be in the race before the next: arrival order is the order of election.
		lockagenttest.Eventually(t, 5*time.Second, func() bool {
			return len(termsOf(t, log)) == 1 && int(max(watcher.Do("WHO svc/leader").Int("queued"), 0)) == i
		}, "candidate %d not in the race: %q", i, candidates[i].stderr.String())
	}
	// One holder, two queued, one term begun: only the leader runs.
	terms := termsOf(t, log)
	if r := watcher.Do("WHO svc/leader"); r.Int("n") != 1 || len(terms) != 1 || terms[0][0] != "0" {
		t.Fatalf("WHO %s; terms %q", r.Line, terms)
	}
	pid, _ := strconv.Atoi(terms[0][2])
	syscall.Kill(pid, syscall.SIGKILL)
	if code := candidates[0].exited(10 * time.Second); code != 128+9 {
		t.Fatalf("the first leader's elect exited %d, want 137 (its command killed): %s", code, candidates[0].stderr.String())
	}
	lockagenttest.Eventually(t, 10*time.Second, func() bool { return len(termsOf(t, log)) == 2 }, "no second term")
	terms = termsOf(t, log)
	if terms[1][0] != "1" || atoiT(t, terms[1][1]) <= atoiT(t, terms[0][1]) {
		t.Fatalf("terms %q: want candidate 1 next, with a greater term", terms)
	}
	candidates[1].cmd.Process.Signal(syscall.SIGTERM)
	if code := candidates[1].exited(10 * time.Second); code != 3 {
		t.Fatalf("the second leader's elect exited %d, want its command's 3: %s", code, candidates[1].stderr.String())
	}
	lockagenttest.Eventually(t, 10*time.Second, func() bool { return len(termsOf(t, log)) == 3 }, "no third term")
	if terms = termsOf(t, log); terms[2][0] != "2" || atoiT(t, terms[2][1]) <= atoiT(t, terms[1][1]) {
		t.Fatalf("terms %q", terms)
	}
}

func atoiT(t *testing.T, s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("%q is not a number", s)
	}
	return n
}

// TestElectExitCodes: a campaign that gives up is busy (1, or
// -conflict-exit); leadership lost stops the command and exits 124; bad
// usage exits 64 (as exec) and runs nothing.
func TestElectExitCodes(t *testing.T) {
	a, _, _ := twoAgents(t, 3*time.Second)
	sock := a.Config.Socket.Path
	holder := agenttest.Dial(t, sock)
	if r := holder.Do("LOCK svc/busy fair=true"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	if code, _, errOut := lockAgent(t, "elect", "-socket", sock, "-n", "svc/busy", "--", "true"); code != 1 || !strings.Contains(errOut, "busy") {
		t.Fatalf("busy: exit %d %q", code, errOut)
	}
	if code, _, _ := lockAgent(t, "elect", "-socket", sock, "-wait", "100ms", "-E", "75", "svc/busy", "--", "true"); code != 75 {
		t.Fatalf("busy with -E 75: exit %d", code)
	}
	start := time.Now()
	code, _, errOut := lockAgent(t, "elect", "-socket", sock, "-ttl", "300ms", "svc/lost", "--", "sleep", "30")
	if took := time.Since(start); code != 124 || took > 15*time.Second || !strings.Contains(errOut, "lost") {
		t.Fatalf("lost: exit %d after %v: %q", code, took, errOut)
	}
	marker := filepath.Join(t.TempDir(), "ran")
	for _, args := range [][]string{
		{"svc/a,svc/b", "--", "touch", marker},
		{"-shared", "svc/a", "--", "touch", marker},
		{"-on-wanted", "NOSUCH", "svc/a", "--", "touch", marker},
		{"-delay", "forever", "svc/a", "--", "touch", marker},
	} {
		if code, _, _ := lockAgent(t, append([]string{"elect", "-socket", sock}, args...)...); code != 64 {
			t.Fatalf("%q: exit %d, want 64 (EX_USAGE, as exec)", args, code)
		}
	}
	if code, _, errOut := lockAgent(t, "elect", "-socket", sock, "-delay", "6m", "svc/a", "--", "touch", marker); code != 1 || !strings.Contains(errOut, "delay") {
		t.Fatalf("-delay 6m: exit %d %q", code, errOut)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a refused elect ran its command")
	}
}

// watchedLeaders reads leader -watch -json's output: one object a line.
func watchedLeaders(t *testing.T, out *syncBuffer) []lockagent.Leader {
	var leaders []lockagent.Leader
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if line == "" {
			continue
		}
		var l lockagent.Leader
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("a line that is not one JSON object: %q (%v)", line, err)
		}
		leaders = append(leaders, l)
	}
	return leaders
}

// TestLeaderWatchJSON: leader -watch -json on one agent prints one object a
// line at every change made through the other agent (an elect's term and
// value, a SET, the end of the term), and exits 0 on SIGINT; leader without
// -watch prints the current one.
func TestLeaderWatchJSON(t *testing.T) {
	a, b, _ := twoAgents(t, 3*time.Second)
	var out syncBuffer
	watch := startCLI(t, &out, "leader", "-watch", "-json", "-socket", b.Config.Socket.Path, "svc/w")
	lockagenttest.Eventually(t, 10*time.Second, func() bool { return len(watchedLeaders(t, &out)) == 1 },
		"no first line: %q %q", &out, watch.stderr.String())
	if l := watchedLeaders(t, &out)[0]; !l.None || l.Name != "svc/w" {
		t.Fatalf("first line %+v, want none", l)
	}
	elect := startCLI(t, nil, "elect", "-socket", a.Config.Socket.Path, "-value", "a b\n✓", "svc/w", "--",
		"sh", "-c", "exec sleep 30")
	lockagenttest.Eventually(t, 10*time.Second, func() bool { return len(watchedLeaders(t, &out)) == 2 },
		"the elected one not shown: %q %q", &out, elect.stderr.String())
	term := watchedLeaders(t, &out)[1]
	if term.None || term.Fence <= 0 || term.Value != "a b\n✓" || term.Agent != "host-a" {
		t.Fatalf("the term shown: %+v", term)
	}
	code, once, errOut := lockAgent(t, "leader", "-json", "-socket", b.Config.Socket.Path, "svc/w")
	if l := watchedLeaders(t, bufferOf(once)); code != 0 || len(l) != 1 || l[0] != term {
		t.Fatalf("leader -json: exit %d %q %q", code, once, errOut)
	}
	elect.cmd.Process.Signal(syscall.SIGTERM)
	if code := elect.exited(10 * time.Second); code != 128+int(syscall.SIGTERM) {
		t.Fatalf("elect exited %d", code)
	}
	lockagenttest.Eventually(t, 10*time.Second, func() bool { return len(watchedLeaders(t, &out)) == 3 },
		"the end of the term not shown: %q", &out)
	if l := watchedLeaders(t, &out)[2]; !l.None {
		t.Fatalf("after the term: %+v", l)
	}
	watch.cmd.Process.Signal(syscall.SIGINT)
	if code := watch.exited(10 * time.Second); code != 0 {
		t.Fatalf("leader -watch exited %d on SIGINT: %s", code, watch.stderr.String())
	}
}

func bufferOf(s string) *syncBuffer {
	var b syncBuffer
	b.Write([]byte(s))
	return &b
}
