package tests

import (
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/agenttest"
)

// TestExecOnWantedSignalsTheCommand: exec -on-wanted USR1 sends USR1 to the
// command's group when a conflicting request waits on the other agent; the
// command finishes early, and the waiter is granted.
func TestExecOnWantedSignalsTheCommand(t *testing.T) {
	a, b, _ := twoAgents(t, 3*time.Second)
	ready := filepath.Join(t.TempDir(), "ready")
	run := startCLI(t, nil, "exec", "-socket", a.Config.Socket.Path, "-on-wanted", "USR1", "jobs/wanted", "--",
		"sh", "-c", `trap 'echo wanted >&2; exit 7' USR1; echo $$ > `+ready+`; while :; do sleep 0.05; done`)
	t.Cleanup(func() { // a failure says what exec and the agent saw (seen once in CI: the file never came)
		if t.Failed() {
			c := agenttest.Dial(t, a.Config.Socket.Path)
			t.Logf("exec's stderr: %q; agent a: WHO %v, STATUS %s", run.stderr.String(), c.Do("WHO jobs/wanted").Data, c.Do("STATUS").Line)
		}
	})
	pid, _ := strconv.Atoi(waitForFile(t, ready))
	t.Cleanup(func() { syscall.Kill(-pid, syscall.SIGKILL) }) // its own group: exec's kill leaves it
	waiter := agenttest.Dial(t, b.Config.Socket.Path)
	start := time.Now()
	if r := waiter.Do("LOCK jobs/wanted wait=10s"); r.Kind != "OK" {
		t.Fatalf("the waiter: %s", r.Line)
	}
	if code := run.exited(10 * time.Second); code != 7 || !strings.Contains(run.stderr.String(), "wanted") {
		t.Fatalf("exec exited %d after %v: %q", code, time.Since(start), run.stderr.String())
	}
}

// TestExecMinHold: exec -min-hold keeps the name from everyone until that
// long after the grant, though the command was done at once.
func TestExecMinHold(t *testing.T) {
	a, b, _ := twoAgents(t, 3*time.Second)
	start := time.Now()
	if code, _, errOut := lockAgent(t, "exec", "-socket", a.Config.Socket.Path, "-min-hold", "1s", "jobs/once", "--", "true"); code != 0 {
		t.Fatalf("exit %d %q", code, errOut)
	}
	other := agenttest.Dial(t, b.Config.Socket.Path)
	if r := other.Do("LOCK jobs/once wait=0"); r.Kind != "BUSY" && (r.Kind != "OK" || time.Since(start) < time.Second) {
		t.Fatalf("within -min-hold: %s", r.Line)
	}
	lockagenttest.Eventually(t, 10*time.Second, func() bool { return other.Do("LOCK jobs/once wait=5s").Kind == "OK" },
		"never granted after -min-hold")
	if took := time.Since(start); took < time.Second {
		t.Fatalf("granted %v after the first grant, within -min-hold 1s", took)
	}
}
