package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
)

// TestParseExecCoordinationFlags: -value, -on-wanted, -delay and -min-hold
// are read as exec's other flags, before or after NAME.
func TestParseExecCoordinationFlags(t *testing.T) {
	o, err := parseExecArgs([]string{"-value", "host:1 a", "n", "-on-wanted", "usr1", "-delay", "0s", "-min-hold", "1m", "--", "cmd"})
	if err != nil {
		t.Fatal(err)
	}
	if o.value != "host:1 a" || o.onWanted != syscall.SIGUSR1 || !o.delay.set || o.delay.d != 0 || o.minHold != time.Minute {
		t.Fatalf("got %+v", o)
	}
	for _, s := range []struct {
		in   string
		want syscall.Signal
	}{{"TERM", syscall.SIGTERM}, {"SIGHUP", syscall.SIGHUP}, {"sigusr2", syscall.SIGUSR2}, {"10", syscall.Signal(10)}} {
		if got, err := parseSignal(s.in); err != nil || got != s.want {
			t.Errorf("parseSignal(%q) = %v, %v; want %v", s.in, got, err, s.want)
		}
	}
	o, _ = parseExecArgs([]string{"n", "cmd"})
	if o.delay.set || o.onWanted != 0 {
		t.Fatalf("without the flags: %+v", o)
	}
	for _, bad := range [][]string{
		{"-on-wanted", "NOPE", "n", "cmd"}, {"-on-wanted", "0", "n", "cmd"}, {"-delay", "soon", "n", "cmd"},
		{"-min-hold", "x", "n", "cmd"},
	} {
		if _, err := parseExecArgs(bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

// TestElectSendsAFairLockWithItsValue: elect is exec with fair=true and
// -value's value=, percent-encoded; the coordination flags of exec go on the
// same LOCK. Wire level; ../../tests/elect_test.go runs elect against the
// real agents.
func TestElectSendsAFairLockWithItsValue(t *testing.T) {
	fake := lockagenttest.StartFake(t, func(verb string, args []string) []string {
		switch verb {
		case "LOCK":
			return []string{"OK fence=11 validity=5000 count=1"}
		case "WHO":
			return []string{"OK n=0"}
		}
		return []string{"OK"}
	})
	var stdout, stderr bytes.Buffer
	code := electCmd([]string{"-socket", fake.Path, "-value", "http://h:80/x y", "svc/leader", "-delay", "2s", "-min-hold", "1s",
		"-on-wanted", "USR1", "--", "true"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	sent := fake.Requests()
	want := "LOCK svc/leader fair=true value=http://h:80/x%20y notify=wanted delay=2000 min_hold=1000"
	if len(sent) == 0 || withoutOwner(sent[0]) != want {
		t.Fatalf("sent %q, want %q first", sent, want)
	}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"several names", []string{"-socket", fake.Path, "a,b", "--", "true"}},
		{"shared", []string{"-socket", fake.Path, "-shared", "a", "--", "true"}},
		{"a semaphore", []string{"-socket", fake.Path, "-limit", "2", "a", "--", "true"}},
		{"no command", []string{"-socket", fake.Path, "a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(fake.Requests())
			if code := electCmd(tc.args, &stdout, &stderr); code != exitUsage {
				t.Fatalf("exit %d, want %d", code, exitUsage)
			}
			if len(fake.Requests()) != before {
				t.Fatal("sent something")
			}
		})
	}
}

func withoutOwner(line string) string {
	var words []string
	for _, w := range strings.Fields(line) {
		if !strings.HasPrefix(w, "owner=") {
			words = append(words, w)
		}
	}
	return strings.Join(words, " ")
}

// TestLeaderPrintsOneLineEach: leader prints the current leader, in text
// (the value quoted: it may hold a newline) or JSON, one line each.
func TestLeaderPrintsOneLineEach(t *testing.T) {
	fake := lockagenttest.StartFake(t, func(verb string, args []string) []string {
		if verb == "OBSERVE" && args[0] == "svc/none" {
			return []string{"OK", "* LEADER svc/none none"}
		}
		return []string{"OK", "* LEADER svc/l fence=12 value=a%0Ab agent=host-a"}
	})
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"svc/l"}, "svc/l: term 12, agent host-a, value \"a\\nb\"\n"},
		{[]string{"-json", "svc/l"}, `{"name":"svc/l","none":false,"fence":12,"value":"a\nb","agent":"host-a"}` + "\n"},
		{[]string{"svc/none"}, "svc/none: no leader\n"},
		{[]string{"-json", "svc/none"}, `{"name":"svc/none","none":true,"fence":0,"value":"","agent":""}` + "\n"},
	} {
		var stdout, stderr bytes.Buffer
		if code := leaderCmd(append([]string{"-socket", fake.Path}, tc.args...), &stdout, &stderr); code != 0 {
			t.Fatalf("%q: exit %d %s", tc.args, code, stderr.String())
		}
		if stdout.String() != tc.want {
			t.Errorf("%q printed %q, want %q", tc.args, stdout.String(), tc.want)
		}
		if strings.Contains(tc.want, "{") && !json.Valid(stdout.Bytes()) {
			t.Errorf("not JSON: %s", stdout.String())
		}
	}
	var stdout, stderr bytes.Buffer
	if code := leaderCmd([]string{"-socket", fake.Path}, &stdout, &stderr); code != exitUsage {
		t.Fatalf("no NAME: exit %d", code)
	}
}
