package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// The exit codes every command shares, written out: a test must not follow
// a constant that changes under it.
const (
	wantUsage  = 64
	wantConfig = 2
)

func runMain(args ...string) (code int, stdout, stderr string) {
	var out, errs bytes.Buffer
	code = realMain(args, &out, &errs)
	return code, out.String(), errs.String()
}

// everyCommand is each verb as a user types it, by name: the table test
// below must not follow the table it checks.
var everyCommand = []string{"run", "validate", "bootstrap", "settings", "exec", "elect", "leader", "status", "who", "revoke",
	"version", "completion", "man"}

// TestHelpExitsZeroAndPrintsUsageOnce: -h and --help of every command print
// its usage to stdout, once, and exit 0.
func TestHelpExitsZeroAndPrintsUsageOnce(t *testing.T) {
	for _, name := range everyCommand {
		for _, h := range []string{"-h", "--help"} {
			t.Run(name+" "+h, func(t *testing.T) {
				code, stdout, stderr := runMain(name, h)
				if code != 0 || stderr != "" || strings.Count(stdout, "usage:") != 1 {
					t.Fatalf("exit %d, want 0; stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
				}
			})
		}
	}
	for _, h := range []string{"-h", "--help", "help"} {
		if code, stdout, _ := runMain(h); code != 0 || !strings.Contains(stdout, "commands:") {
			t.Errorf("lock-agent %s: exit %d\n%s", h, code, stdout)
		}
	}
}

// TestUsageErrorsExit64 : a wrong command line exits 64 (EX_USAGE) with
// the reason and the usage, once, on stderr, naming the program once.
func TestUsageErrorsExit64(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"no command at all", nil},
		{"an unknown command", []string{"frobnicate"}},
		{"run with neither -config nor -dev", []string{"run"}},
		{"run with an unknown flag", []string{"run", "-dev", "-nope"}},
		{"validate without -config", []string{"validate"}},
		{"bootstrap with an argument", []string{"bootstrap", "-config", "x", "y"}},
		{"settings without -config", []string{"settings", "-apply"}},
		{"exec without a command", []string{"exec", "name"}},
		{"elect with an unknown flag", []string{"elect", "-nope", "name", "true"}},
		{"elect without a name", []string{"elect"}},
		{"leader without a name", []string{"leader"}},
		{"status with an argument", []string{"status", "extra"}},
		{"who without a name", []string{"who"}},
		{"who with an unknown flag", []string{"who", "-nope", "x"}},
		{"revoke without a name", []string{"revoke"}},
		{"version with an argument", []string{"version", "extra"}},
		{"completion of an unknown shell", []string{"completion", "tcsh"}},
		{"man with an argument", []string{"man", "extra"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runMain(tc.args...)
			if code != wantUsage || stdout != "" || strings.Count(stderr, "usage:") != 1 {
				t.Fatalf("exit %d, want %d; stdout:\n%s\nstderr:\n%s", code, wantUsage, stdout, stderr)
			}
			if strings.Contains(stderr, "lockagent:") || strings.Contains(stderr, "lock-agent: lock-agent") {
				t.Errorf("names the program twice:\n%s", stderr)
			}
		})
	}
}

// TestConfigErrorsExit2: an invalid config file is not a usage error: it
// exits 2, in validate as in run.
func TestConfigErrorsExit2(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.hcl")
	os.WriteFile(bad, []byte("lock {\n  leese = \"1s\"\n}\n"), 0o600)
	for _, verb := range []string{"validate", "run", "bootstrap", "settings"} {
		if code, _, stderr := runMain(verb, "-config", bad); code != wantConfig || !strings.Contains(stderr, "bad.hcl:2") {
			t.Errorf("%s: exit %d, want %d\n%s", verb, code, wantConfig, stderr)
		}
	}
}

// TestEveryNoAgentErrorGivesTheSameHint: with nothing at the socket, each
// command that needs the agent says where it looked, where clients look,
// and what to run, and names the program once.
func TestEveryNoAgentErrorGivesTheSameHint(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "agent.sock")
	for _, args := range [][]string{
		{"status", "-socket", sock},
		{"who", "-socket", sock, "n"},
		{"leader", "-socket", sock, "n"},
		{"revoke", "-socket", sock, "n"},
		{"exec", "-socket", sock, "n", "true"},
		{"elect", "-socket", sock, "n", "true"},
	} {
		t.Run(args[0], func(t *testing.T) {
			code, _, stderr := runMain(args...)
			if code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			for _, want := range []string{"lock-agent " + args[0] + ": no agent answers at " + sock + " (no such file or directory)",
				"$LOCK_AGENT_SOCKET", "/run/lock-agent/agent.sock", "lock-agent run -dev", "systemctl start lock-agent.socket"} {
				if !strings.Contains(stderr, want) {
					t.Errorf("no %q in:\n%s", want, stderr)
				}
			}
			if strings.Contains(stderr, "lockagent:") || strings.Count(stderr, "lock-agent "+args[0]+":") != 1 {
				t.Errorf("names the program more than once:\n%s", stderr)
			}
		})
	}
}

// TestVersion: version and version -json say the version, commit and Go
// version; unstamped (go test), both are "dev".
func TestVersion(t *testing.T) {
	code, stdout, _ := runMain("version")
	if want := "lock-agent dev (commit dev, " + runtime.Version(); code != 0 || !strings.HasPrefix(stdout, want) {
		t.Errorf("version: exit %d %q, want %q...", code, stdout, want)
	}
	code, stdout, _ = runMain("version", "-json")
	var v map[string]string
	if err := json.Unmarshal([]byte(stdout), &v); code != 0 || err != nil || v["version"] != "dev" || v["commit"] != "dev" || v["goversion"] != runtime.Version() {
		t.Errorf("version -json: exit %d %v %q", code, err, stdout)
	}
}

// TestVersionIsStampedByTheLinker builds the binary as scripts/release does
// and asks it.
func TestVersionIsStampedByTheLinker(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "lock-agent")
	const pkg = "github.com/lock-agent/lock-agent/internal/buildinfo"
	build := exec.Command("go", "build", "-o", bin, "-ldflags", "-X "+pkg+".version=9.8.7 -X "+pkg+".commit=0123abc", ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version", "-json").Output()
	var v map[string]string
	if err != nil || json.Unmarshal(out, &v) != nil || v["version"] != "9.8.7" || v["commit"] != "0123abc" {
		t.Fatalf("%v %s", err, out)
	}
}
