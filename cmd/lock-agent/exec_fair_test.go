package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
)

// TestExecFairSendsOneLockWithFairTrue: -fair is fair=true on the one LOCK
// of every name, and the command learns each name's fence and slot in the
// order given. Wire level only (the fake grants a semaphore slot per name
// on cue); ../../tests/exec_test.go runs exec against the real agents.
func TestExecFairSendsOneLockWithFairTrue(t *testing.T) {
	fake := lockagenttest.StartFake(t, func(verb string, args []string) []string {
		switch verb {
		case "LOCK":
			return []string{"OK fence=11,12 validity=5000 count=1,1 slot=2,1"}
		case "WHO":
			return []string{"OK n=0"}
		}
		return []string{"OK"}
	})
	out := filepath.Join(t.TempDir(), "env")
	var stdout, stderr bytes.Buffer
	code := execCmd([]string{"-socket", fake.Path, "-fair", "-limit", "2", "b,a", "--", "sh", "-c",
		`echo "$LOCK_AGENT_NAME $LOCK_AGENT_FENCE $LOCK_AGENT_SLOT" > ` + out}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	sent := fake.Requests()
	if len(sent) > 0 && sent[0] == "STATUS" { // exec reads the agent's lock.lock_delay first
		sent = sent[1:]
	}
	if len(sent) == 0 || !strings.HasPrefix(sent[0], "LOCK b a owner=") || !strings.HasSuffix(sent[0], " limit=2 fair=true delay=6000") {
		t.Fatalf("sent %q, want one LOCK b a ... limit=2 fair=true delay=6000 first (the delay covers -kill-after)", sent)
	}
	for _, s := range sent[1:] {
		if strings.HasPrefix(s, "LOCK") {
			t.Fatalf("a second LOCK: %q", sent)
		}
	}
	env, _ := os.ReadFile(out)
	if got := strings.TrimSpace(string(env)); got != "b,a 11,12 2,1" {
		t.Fatalf("the command got %q, want %q", got, "b,a 11,12 2,1")
	}
	// Without -fair there is no fair= on the wire.
	before := len(fake.Requests())
	if code := execCmd([]string{"-socket", fake.Path, "n", "--", "true"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if s := fake.Requests()[before+1]; strings.Contains(s, "fair") || !strings.HasPrefix(s, "LOCK n ") {
		t.Fatalf("without -fair: sent %q", s)
	}
}

// TestExecNeverLowersTheAgentsLockDelay: without -delay, exec's delay= is
// -kill-after + 1s, or the agent's lock.lock_delay (STATUS) if longer, so
// that exec never shortens a delay the operator set for every LOCK; with
// -delay, the flag's, and no STATUS is needed.
func TestExecNeverLowersTheAgentsLockDelay(t *testing.T) {
	for _, tc := range []struct {
		name      string
		args      []string
		agent     string // STATUS's lock_delay=, "" for an agent older than it
		wantDelay string
	}{
		{"the agent's delay is longer: exec keeps it", nil, "30000", "delay=30000"},
		{"the agent's delay is shorter: exec's covers -kill-after", nil, "100", "delay=6000"},
		{"an agent older than lock_delay=: exec's", nil, "", "delay=6000"},
		{"-delay given: the flag's, even if shorter", []string{"-delay", "2s"}, "30000", "delay=2000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := lockagenttest.StartFake(t, func(verb string, args []string) []string {
				switch verb {
				case "STATUS":
					if tc.agent == "" {
						return []string{"OK agent=0.1.0 quorum=2"}
					}
					return []string{"OK agent=0.1.0 quorum=2 lock_delay=" + tc.agent}
				case "LOCK":
					return []string{"OK fence=11 validity=5000 count=1"}
				case "WHO":
					return []string{"OK n=0"}
				}
				return []string{"OK"}
			})
			var stdout, stderr bytes.Buffer
			if code := execCmd(append(append([]string{"-socket", fake.Path}, tc.args...), "n", "--", "true"), &stdout, &stderr); code != 0 {
				t.Fatalf("exit %d: %s", code, stderr.String())
			}
			for _, s := range fake.Requests() {
				if strings.HasPrefix(s, "LOCK ") {
					if !strings.HasSuffix(s, " "+tc.wantDelay) {
						t.Fatalf("sent %q, want %s", s, tc.wantDelay)
					}
					return
				}
			}
			t.Fatalf("no LOCK sent: %q", fake.Requests())
		})
	}
}
