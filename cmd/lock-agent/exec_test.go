package main

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseExecArgs(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wait    time.Duration // -1: forever
		exit    int
		command []string
	}{
		{"flags before NAME", []string{"-wait", "5", "n", "--", "cmd", "-x"}, 5 * time.Second, 1, []string{"cmd", "-x"}},
		{"flags after NAME, as flock takes them", []string{"n", "-w", "0.5", "-E", "0", "--", "cmd"}, 500 * time.Millisecond, 0, []string{"cmd"}},
		{"a Go duration is a wait too", []string{"-wait", "2m", "n", "cmd"}, 2 * time.Minute, 1, []string{"cmd"}},
		{"-n tries once", []string{"n", "-n", "cmd", "-n"}, 0, 1, []string{"cmd", "-n"}},
		{"no -wait waits forever", []string{"n", "cmd"}, -1, 1, []string{"cmd"}},
		{"-c runs a shell string", []string{"n", "-c", "a | b"}, -1, 1, []string{"/bin/sh", "-c", "a | b"}},
		{"a command after -- may look like a flag", []string{"n", "--", "-weird"}, -1, 1, []string{"-weird"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parseExecArgs(tt.args)
			if err != nil {
				t.Fatal(err)
			}
			wait := time.Duration(-1)
			if o.wait.set {
				wait = o.wait.d
			}
			if o.name != "n" || !reflect.DeepEqual(o.names, []string{"n"}) || o.fair || wait != tt.wait || o.conflictExit != tt.exit || !reflect.DeepEqual(o.command, tt.command) {
				t.Fatalf("got name %q wait %v exit %d command %q", o.name, wait, o.conflictExit, o.command)
			}
		})
	}
}

// TestParseExecArgsNames: several names are one NAME with commas (a comma
// is never part of a name), so every command line of one name keeps its
// meaning, a command's own "--" included.
func TestParseExecArgsNames(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		names   []string
		fair    bool
		command []string
	}{
		{"two names before --", []string{"a,b", "--", "cmd"}, []string{"a", "b"}, false, []string{"cmd"}},
		{"the order given is kept", []string{"z/2,a/1,m", "cmd"}, []string{"z/2", "a/1", "m"}, false, []string{"cmd"}},
		{"flags after several names", []string{"a,b", "-fair", "-w", "1", "cmd"}, []string{"a", "b"}, true, []string{"cmd"}},
		{"-fair before NAME", []string{"-fair", "n", "--", "cmd"}, []string{"n"}, true, []string{"cmd"}},
		{"a command with its own -- stays one command", []string{"n", "git", "diff", "--", "f"}, []string{"n"}, false, []string{"git", "diff", "--", "f"}},
		{"-- after several names and in the command", []string{"a,b", "--", "cmd", "--", "x"}, []string{"a", "b"}, false, []string{"cmd", "--", "x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parseExecArgs(tt.args)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(o.names, tt.names) || o.fair != tt.fair || !reflect.DeepEqual(o.command, tt.command) {
				t.Fatalf("got names %q fair %v command %q", o.names, o.fair, o.command)
			}
			if want := strings.Join(tt.names, ","); o.name != want {
				t.Fatalf("name %q, want NAME as given, %q", o.name, want)
			}
		})
	}
}

func TestParseExecArgsErrors(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
	}{
		{"no NAME", nil},
		{"no command", []string{"n"}},
		{"no command after --", []string{"n", "--"}},
		{"a wait that is not a time", []string{"-wait", "soon", "n", "cmd"}},
		{"a negative wait", []string{"-w", "-1", "n", "cmd"}},
		{"-c and a command", []string{"n", "-c", "x", "cmd"}},
		{"an exit status out of range", []string{"-E", "300", "n", "cmd"}},
		{"an unknown flag after NAME", []string{"n", "-frob", "cmd"}},
		{"-F with -o: nothing would hold the lock", []string{"-F", "-o", "n", "cmd"}},
		{"-F with -on-wanted: nobody to signal", []string{"--no-fork", "-on-wanted", "usr1", "n", "cmd"}},
		{"-F with -ttl: nobody to stop CMD", []string{"-F", "-ttl", "1m", "n", "cmd"}},
		{"an empty name between commas", []string{"a,,b", "cmd"}},
		{"a trailing comma", []string{"a,", "cmd"}},
		{"a leading comma", []string{",a", "cmd"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := parseExecArgs(tt.args); err == nil || errors.Is(err, errHelp) {
				t.Fatalf("accepted %q (%v)", tt.args, err)
			}
		})
	}
	for _, help := range []string{"-h", "--help", "-help"} {
		if _, err := parseExecArgs([]string{help}); !errors.Is(err, errHelp) {
			t.Fatalf("%s: %v", help, err)
		}
	}
}

// TestParseExecArgsFlock: flock's command lines keep their meaning with
// `flock FILE` swapped for `lock-agent exec NAME`.
func TestParseExecArgsFlock(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want execOptions // the fields compared: wait, shared, conflictExit, close, noFork, command
	}{
		{"--nonblock --conflict-exit-code 123", []string{"--nonblock", "--conflict-exit-code", "123", "n", "echo", "x"},
			execOptions{wait: waitValue{0, true}, conflictExit: 123, command: []string{"echo", "x"}}},
		{"--no-fork --nonblock", []string{"--no-fork", "--nonblock", "-E", "123", "n", "echo"},
			execOptions{wait: waitValue{0, true}, conflictExit: 123, noFork: true, command: []string{"echo"}}},
		{"--shared", []string{"--shared", "n", "echo"}, execOptions{shared: true, conflictExit: 1, command: []string{"echo"}}},
		{"-x after -s wins, as flock's last mode", []string{"-s", "-x", "n", "echo"}, execOptions{conflictExit: 1, command: []string{"echo"}}},
		{"-e is -x", []string{"-se", "n", "echo"}, execOptions{conflictExit: 1, command: []string{"echo"}}},
		{"--timeout 5 --conflict-exit-code 5", []string{"--timeout", "5", "--conflict-exit-code", "5", "n", "echo"},
			execOptions{wait: waitValue{5 * time.Second, true}, conflictExit: 5, command: []string{"echo"}}},
		{"-w .007, flock's example", []string{"-w", ".007", "n", "-c", "echo"},
			execOptions{wait: waitValue{7 * time.Millisecond, true}, conflictExit: 1, command: []string{"/bin/sh", "-c", "echo"}}},
		{"-n wins over -w, whatever the order", []string{"-n", "-w", "5", "n", "echo"},
			execOptions{wait: waitValue{0, true}, conflictExit: 1, command: []string{"echo"}}},
		{"bundled -xnE 7", []string{"-xnE", "7", "n", "echo"}, execOptions{wait: waitValue{0, true}, conflictExit: 7, command: []string{"echo"}}},
		{"--exclusive --close --command after NAME", []string{"--exclusive", "--close", "n", "--command", "a; b"},
			execOptions{conflictExit: 1, close: true, command: []string{"/bin/sh", "-c", "a; b"}}},
		{"-o -c after NAME, bundled", []string{"n", "-oc", "a"}, execOptions{conflictExit: 1, close: true, command: []string{"/bin/sh", "-c", "a"}}},
		{"-F alone", []string{"-F", "n", "cmd"}, execOptions{conflictExit: 1, noFork: true, command: []string{"cmd"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parseExecArgs(tt.args)
			if err != nil {
				t.Fatal(err)
			}
			got := execOptions{wait: o.wait, shared: o.shared, conflictExit: o.conflictExit, close: o.close, noFork: o.noFork, command: o.command}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// TestElectRefusesNoFork: elect must stay to stop CMD once leadership is
// lost, so it refuses exec's -F; -o leaves elect holding, and is fine.
func TestElectRefusesNoFork(t *testing.T) {
	for _, tt := range []struct {
		flag string
		ok   bool
	}{{"-F", false}, {"--no-fork", false}, {"-o", true}} {
		o, err := parseExecArgs([]string{tt.flag, "n", "cmd"})
		if err != nil {
			t.Fatal(err)
		}
		if err := electable(o); (err == nil) != tt.ok {
			t.Errorf("elect %s: %v", tt.flag, err)
		}
	}
}
