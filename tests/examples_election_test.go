package tests

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The election examples run here, as the others in examples_test.go, so
// they cannot rot.

func TestElectionExamplesRun(t *testing.T) {
	a := exampleAgent(t)
	want := []string{"observer: nobody leads", `the first candidate leads, value "10.0.0.5:8080"`,
		`the first candidate proclaims "10.0.0.5:9090"`, "the second candidate leads, a newer term: true",
		"resigned, nobody leads"}
	for _, tc := range []struct {
		name string
		cmd  *exec.Cmd
		more string
	}{
		{"Go", exec.Command("go", "run", "./examples/election"), ""},
		{"Python", exec.Command("python3", "examples/python/election.py"), "asyncio: elected, value 'asyncio ✓'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cmd.Dir = ".."
			tc.cmd.Env = append(os.Environ(), "LOCK_AGENT_SOCKET="+a.Config.Socket.Path, "PYTHONPATH=clients/python")
			out, err := tc.cmd.CombinedOutput()
			text := strings.ReplaceAll(strings.ReplaceAll(string(out), "'", `"`), "True", "true")
			for _, w := range append(want, strings.ReplaceAll(tc.more, "'", `"`)) {
				if err != nil || !strings.Contains(text, w) {
					t.Fatalf("%v: no %q in\n%s", err, w, out)
				}
			}
		})
	}
}
