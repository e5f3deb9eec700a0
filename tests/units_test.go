package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSystemdUnitIsHardened: the example unit (and the Debian package's,
// made from it by scripts/release) keeps every hardening directive of
// node_exporter's example unit and more, with socket activation, Type=notify
// and the watchdog still in place.
func TestSystemdUnitIsHardened(t *testing.T) {
	unit := unitSettings(t, "../examples/systemd/lock-agent.service")
	for key, want := range map[string]string{
		"Type": "notify", "WatchdogSec": "30", "Requires": "lock-agent.socket", "RuntimeDirectory": "lock-agent",
		"CapabilityBoundingSet": "", "NoNewPrivileges": "true", "PrivateDevices": "true", "ProtectKernelModules": "true",
		"ProtectKernelLogs": "true", "ProtectKernelTunables": "true", "ProtectControlGroups": "true", "ProtectClock": "true",
		"ProtectHostname": "true", "RestrictNamespaces": "true", "LockPersonality": "true", "MemoryDenyWriteExecute": "true",
		"RestrictSUIDSGID": "true", "RestrictRealtime": "true", "SystemCallArchitectures": "native", "UMask": "0027",
		"ProtectSystem": "strict", "ProtectHome": "true", "PrivateTmp": "true",
	} {
		if got, ok := unit[key]; !ok || got != want {
			t.Errorf("%s=%q, want %q", key, got, want)
		}
	}
	data, _ := os.ReadFile("../examples/systemd/lock-agent.service")
	if !strings.Contains(string(data), "\nSystemCallFilter=@system-service\n") {
		t.Error("no SystemCallFilter=@system-service")
	}
	sock := unitSettings(t, "../examples/systemd/lock-agent.socket")
	if sock["ListenStream"] != "/run/lock-agent/agent.sock" {
		t.Errorf("ListenStream=%q", sock["ListenStream"])
	}
}

// TestSystemdAnalyzeVerifiesTheUnits runs systemd-analyze verify on the
// units, with ExecStart pointing at an executable that exists here. verify
// exits 0 over an unknown key (it only warns), so any output fails.
func TestSystemdAnalyzeVerifiesTheUnits(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed: the units are not verified")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, name := range []string{"lock-agent.service", "lock-agent.socket"} {
		data, err := os.ReadFile(filepath.Join("../examples/systemd", name))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, name), []byte(strings.ReplaceAll(string(data), "/usr/local/bin/lock-agent", self)), 0o644)
	}
	out, err := exec.Command(analyze, "verify", "--man=no", filepath.Join(dir, "lock-agent.socket"), filepath.Join(dir, "lock-agent.service")).CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}
