package tests

import (
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// The examples are run here so they cannot rot.

func exampleAgent(t *testing.T) *agenttest.Agent {
	return agenttest.Start(t, agenttest.Config(t, redistest.Start(t, 3), 15*time.Second))
}

func TestGoExampleRuns(t *testing.T) {
	a := exampleAgent(t)
	cmd := exec.Command("go", "run", "./examples/go")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "LOCK_AGENT_SOCKET="+a.Config.Socket.Path)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "holding examples/nightly-report with fence") || !strings.Contains(string(out), "released") {
		t.Fatalf("%v\n%s", err, out)
	}
}

func TestKindsExampleRuns(t *testing.T) {
	a := exampleAgent(t)
	cmd := exec.Command("go", "run", "./examples/kinds")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "LOCK_AGENT_SOCKET="+a.Config.Socket.Path)
	out, err := cmd.CombinedOutput()
	for _, want := range []string{"two readers hold", "encoder slots 1 and 2", "holding examples/stock and examples/orders", "holding examples/deploy fairly"} {
		if err != nil || !strings.Contains(string(out), want) {
			t.Fatalf("%v: no %q in\n%s", err, want, out)
		}
	}
}

func TestPythonExampleRuns(t *testing.T) {
	a := exampleAgent(t)
	cmd := exec.Command("python3", "examples/python/nightly.py")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "LOCK_AGENT_SOCKET="+a.Config.Socket.Path, "PYTHONPATH=clients/python")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "report written with fence") || !strings.Contains(string(out), "asyncio: released") {
		t.Fatalf("%v\n%s", err, out)
	}
}

// TestCronExampleRuns runs the cron line's command as cron would (sh -c),
// with the report script replaced by one that records its run.
func TestCronExampleRuns(t *testing.T) {
	a := exampleAgent(t)
	data, err := os.ReadFile("../examples/cron/nightly-report.cron")
	if err != nil {
		t.Fatal(err)
	}
	var line string
	for _, l := range strings.Split(string(data), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			line = l
		}
	}
	fields := strings.Fields(line)
	if len(fields) < 7 {
		t.Fatalf("no cron line in %q", data)
	}
	command := strings.Join(fields[6:], " ") // minute hour dom month dow user command
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	report := filepath.Join(dir, "nightly-report")
	os.WriteFile(report, []byte("#!/bin/sh\necho \"$LOCK_AGENT_FENCE\" > "+marker+"\n"), 0o755)
	command = strings.Replace(command, "/usr/local/bin/nightly-report", report, 1)
	run := func() (int, string) {
		cmd := exec.Command("sh", "-c", command)
		cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(binary(t))+":"+os.Getenv("PATH"),
			"LOCK_AGENT_SOCKET="+a.Config.Socket.Path, raceNoExitSleep)
		out, err := cmd.CombinedOutput()
		return exitCode(err), string(out)
	}
	if code, out := run(); code != 0 {
		t.Fatalf("cron command: exit %d %s", code, out)
	}
	if b, err := os.ReadFile(marker); err != nil || strings.TrimSpace(string(b)) == "" {
		t.Fatalf("the report did not run with a fence: %q %v", b, err)
	}
	os.Remove(marker)
	holder := agenttest.Dial(t, a.Config.Socket.Path)
	holder.Do("LOCK reports/nightly")
	if code, out := run(); code != 0 {
		t.Fatalf("busy run must exit 0 (-conflict-exit 0): exit %d %s", code, out)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the report ran while another host held the lock")
	}
}

// TestProductionConfigExampleIsValid checks examples/agent.hcl with the real
// validate command (its password file pointed at a temporary one).
func TestProductionConfigExampleIsValid(t *testing.T) {
	data, err := os.ReadFile("../examples/agent.hcl")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pass := filepath.Join(dir, "redis.pass")
	os.WriteFile(pass, []byte("secret\n"), 0o600)
	cfg := filepath.Join(dir, "agent.hcl")
	// The socket group must exist where validate runs: use this process's.
	group, err := user.LookupGroupId(strconv.Itoa(os.Getgid()))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(data), "/etc/lock-agent/redis.pass", pass)
	text = strings.Replace(text, `group = "lockers"`, `group = "`+group.Name+`"`, 1)
	os.WriteFile(cfg, []byte(text), 0o600)
	if code, out, errOut := lockAgent(t, "validate", "-config", cfg); code != 0 || !strings.Contains(out, "3 masters, quorum 2") {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
}

// TestSystemdUnitExample checks the unit has what the service relies on and
// that its commands are ones the binary accepts.
func TestSystemdUnitExample(t *testing.T) {
	data, err := os.ReadFile("../examples/systemd/lock-agent.service")
	if err != nil {
		t.Fatal(err)
	}
	unit := string(data)
	for _, want := range []string{"Restart=on-failure", "RuntimeDirectory=lock-agent", "RuntimeDirectoryMode=0750",
		"ExecStart=/usr/local/bin/lock-agent run -config /etc/lock-agent/agent.hcl",
		"ExecStartPre=/usr/local/bin/lock-agent validate -config /etc/lock-agent/agent.hcl", "WantedBy=multi-user.target"} {
		if !strings.Contains(unit, want) {
			t.Errorf("unit lacks %q", want)
		}
	}
	if code, out, _ := lockAgent(t, "help"); code != 0 || !strings.Contains(out, "run -config FILE") || !strings.Contains(out, "validate -config") {
		t.Fatalf("the unit's commands are not the binary's: %s", out)
	}
}
