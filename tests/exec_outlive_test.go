package tests

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/agenttest"
)

// TestExecCommandNeverOutlivesItsLock: a command that ignores SIGTERM is
// told its lock is lost (its -ttl ran out, an operator REVOKEd it, its
// agent lost the quorum of masters, or its agent stopped) while a second exec, on the other
// agent, waits for the name. The two commands never run at the same time:
// the first one's group is gone (SIGKILL after -kill-after) before the
// second is granted the name (consul#9788). Overlap is seen by the kernel,
// not by a clock: the first command and everything it starts hold an
// flock(2) on a file until they die, and the second command tries that
// flock once, first thing.
func TestExecCommandNeverOutlivesItsLock(t *testing.T) {
	t.Parallel()
	a, b, servers := twoAgents(t, 3*time.Second)
	dir := t.TempDir()
	guard := filepath.Join(dir, "guard")
	for _, tc := range []struct {
		name  string
		flags []string
		lose  func(t *testing.T, first *runningExec, name string)
	}{
		{"after its -ttl ran out", []string{"-ttl", "1s"}, func(*testing.T, *runningExec, string) {}},
		{"after an operator revoked it", nil, func(t *testing.T, _ *runningExec, name string) {
			op := agenttest.Dial(t, b.Config.Socket.Path)
			if r := op.Do("REVOKE " + name); r.Kind != "OK" {
				t.Fatalf("REVOKE: %s", r.Line)
			}
		}},
		{"after its agent lost the quorum of masters", nil, func(t *testing.T, first *runningExec, _ string) {
			servers[0].Pause()
			servers[1].Pause()
			lockagenttest.Eventually(t, 20*time.Second, func() bool { return strings.Contains(first.stderr.String(), "lost") },
				"exec not told of its lost lock with 2 of 3 masters paused")
			servers[0].Resume()
			servers[1].Resume()
		}},
		{"after its agent stopped", nil, func(*testing.T, *runningExec, string) {
			a.Stop() // LOST reason=shutdown, then its sessions' holds end uncleanly: the delay applies
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "jobs/outlive-" + strings.ReplaceAll(tc.name, " ", "-")
			name = name[:min(len(name), 60)]
			log := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".log")
			ready := log + ".ready"
			first := startExec(t, append([]string{"-socket", a.Config.Socket.Path, "-kill-after", "3s"}, append(tc.flags, name, "--", "sh", "-c",
				`trap "" TERM; exec 9>`+guard+`; flock -n 9 || { echo overlap-at-start >> `+log+`; exit 99; }; echo held > `+ready+`; while :; do sleep 0.05; done`)...)...)
			waitForFile(t, ready)
			var second *runningExec
			if !strings.Contains(tc.name, "quorum") { // with masters paused its LOCK would fail: it starts once they are back
				second = startExec(t, "-socket", b.Config.Socket.Path, "-w", "60", name, "--", "sh", "-c",
					`flock -n `+guard+` true || echo overlap >> `+log+`; echo second-ran >> `+log+`; date +%s%N > `+log+`.started`)
			}
			tc.lose(t, first, name)
			if second == nil {
				second = startExec(t, "-socket", b.Config.Socket.Path, "-w", "60", name, "--", "sh", "-c",
					`flock -n `+guard+` true || echo overlap >> `+log+`; echo second-ran >> `+log+`; date +%s%N > `+log+`.started`)
			}
			lockagenttest.Eventually(t, 30*time.Second, func() bool { return strings.Contains(first.stderr.String(), "stopping") },
				"the first exec never said it stops its command")
			lostSeen := time.Now()
			if code := first.exited(30 * time.Second); code != 124 {
				t.Fatalf("first exec: exit %d, want 124 (lost): %s", code, first.stderr.String())
			}
			if code := second.exited(60 * time.Second); code != 0 {
				t.Fatalf("second exec: exit %d: %s", code, second.stderr.String())
			}
			if ns, err := strconv.ParseInt(waitForFile(t, log+".started"), 10, 64); err == nil {
				t.Logf("the second command started %v after the first exec said the lock was lost (SIGKILL 3s after)",
					time.Unix(0, ns).Sub(lostSeen).Round(time.Millisecond))
			}
			got, _ := os.ReadFile(log)
			if strings.Contains(string(got), "overlap") || !strings.Contains(string(got), "second-ran") {
				t.Fatalf("the second exec's command ran while the first one's still did (its flock was held): %q; first exec said %q",
					got, first.stderr.String())
			}
		})
	}
}
