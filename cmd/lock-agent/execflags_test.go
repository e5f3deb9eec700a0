package main

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestScanFlags reads command lines the way flock's getopt_long and Go's
// flag package both would, with exec's own flags.
func TestScanFlags(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		flags string // name=value, space separated
		rest  []string
	}{
		{"short flags one by one", []string{"-x", "-n", "-w", "5", "N"}, "x=true n=true w=5", []string{"N"}},
		{"short flags bundled", []string{"-xn", "N"}, "x=true n=true", []string{"N"}},
		{"a bundle ending with a value", []string{"-nw5", "N"}, "n=true w=5", []string{"N"}},
		{"a bundle whose value is the next word", []string{"-nE", "123", "N"}, "n=true E=123", []string{"N"}},
		{"a value may start with a dash", []string{"-w", "-1", "N"}, "w=-1", []string{"N"}},
		{"long with two dashes and a value after it", []string{"--timeout", "5", "N"}, "timeout=5", []string{"N"}},
		{"long with =", []string{"--conflict-exit-code=123", "N"}, "conflict-exit-code=123", []string{"N"}},
		{"long switches", []string{"--nonblock", "--exclusive", "--no-fork", "--close", "N"}, "nonblock=true exclusive=true no-fork=true close=true", []string{"N"}},
		{"a unique prefix of a long flag", []string{"--nonb", "--time=1", "N"}, "nonb=true time=1", []string{"N"}},
		{"a prefix shared by names of one flag", []string{"--conflict-exit-c", "7", "N"}, "conflict-exit-c=7", []string{"N"}},
		{"Go's one-dash long flags", []string{"-wait", "5", "-fair", "-ttl=1m", "N"}, "wait=5 fair=true ttl=1m", []string{"N"}},
		{"a one-dash long name wins over the bundle it spells (-s -o -c ket)", []string{"-socket", "p", "-exclusive", "N"}, "socket=p exclusive=true", []string{"N"}},
		{"a Go switch set to false", []string{"-shared=false", "N"}, "shared=false", []string{"N"}},
		{"Go's one-letter flags with = (exec's spellings before flock's)", []string{"-w=5", "-s=false", "-E=3", "-q=true", "N"}, "w=5 s=false E=3 q=true", []string{"N"}},
		{"a bundle with = is still a bundle", []string{"-nw=5", "N"}, "n=true w==5", []string{"N"}},
		{"-- ends the flags and goes", []string{"-n", "--", "-x"}, "n=true", []string{"-x"}},
		{"a lone dash is a word", []string{"-n", "-", "x"}, "n=true", []string{"-", "x"}},
		{"the first word ends the flags", []string{"N", "-n"}, "", []string{"N", "-n"}},
		{"one-dash prefixes are not long flags but bundles", []string{"-wai", "N"}, "w=ai", []string{"N"}},
		{"-c takes a shell string", []string{"-c", "echo a b"}, "c=echo a b", nil},
		{"--command does too", []string{"--command=exit 3"}, "command=exit 3", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			given, rest, err := scanFlags(execFlagSpecs, tt.args)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range given {
				got = append(got, f.name+"="+f.value)
			}
			if strings.Join(got, " ") != tt.flags || !reflect.DeepEqual(rest, tt.rest) {
				t.Fatalf("got flags %q rest %q, want %q rest %q", got, rest, tt.flags, tt.rest)
			}
		})
	}
}

func TestScanFlagsErrors(t *testing.T) {
	for _, tt := range []struct {
		name, want string
		args       []string
	}{
		{"an unknown short flag", "unknown flag -z", []string{"-z", "N"}},
		{"an unknown letter in a bundle", "unknown flag -z", []string{"-nz", "N"}},
		{"an unknown long flag", "unknown flag --frob", []string{"--frob", "N"}},
		{"a one-dash word that is no long flag is a bundle", "unknown flag -f", []string{"-frob", "N"}},
		{"an ambiguous prefix", "ambiguous", []string{"--n", "N"}},
		{"two dashes and one letter is no short flag", "unknown flag --x", []string{"--x", "N"}},
		{"a one-letter Go switch with a value that is no boolean", "want true or false", []string{"-s=yes", "N"}},
		{"a short flag without its value", "-w needs a value", []string{"-w"}},
		{"a long flag without its value", "--timeout needs a value", []string{"--timeout"}},
		{"a switch with a value that is no boolean", "--nonblock: want true or false", []string{"--nonblock=yes please", "N"}},
		{"an unknown long flag with a value is named without it", "unknown flag --frob", []string{"--frob=1", "N"}},
		{"a one-dash Go switch is quoted with its one dash", "-shared: want true or false", []string{"-shared=yes", "N"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := scanFlags(execFlagSpecs, tt.args)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("%q: got %v, want an error with %q", tt.args, err, tt.want)
			}
		})
	}
}

// TestEveryExecFlagIsSet: each flag has its setter, keyed by its first name.
func TestEveryExecFlagIsSet(t *testing.T) {
	for _, spec := range execFlagSpecs {
		if execFlagSetters[spec.names[0]] == nil {
			t.Errorf("flag %v sets nothing", spec.names)
		}
	}
	if len(execFlagSetters) != len(execFlagSpecs) {
		t.Errorf("%d setters for %d flags", len(execFlagSetters), len(execFlagSpecs))
	}
}

// TestExecKillWindowEndsWithinTheLockDelay: whatever the flags, exec's
// SIGKILL after a loss comes before the lock-delay it asked for ends, by
// killMargin; without -delay the delay is made to cover -kill-after.
func TestExecKillWindowEndsWithinTheLockDelay(t *testing.T) {
	for _, tc := range []struct {
		name       string
		args       []string
		delay      time.Duration
		sendsDelay bool
		window     time.Duration
	}{
		{"the defaults: a delay of -kill-after and a second", nil, 6 * time.Second, true, 5 * time.Second},
		{"-kill-after 2s: a delay of 3s", []string{"-kill-after", "2s"}, 3 * time.Second, true, 2 * time.Second},
		{"-kill-after 0: a delay of a second, SIGKILL with SIGTERM", []string{"-kill-after", "0s"}, time.Second, true, 0},
		{"-delay longer than needed: -kill-after as given", []string{"-delay", "30s"}, 30 * time.Second, true, 5 * time.Second},
		{"-delay shorter: SIGKILL a second before it ends", []string{"-delay", "3s"}, 3 * time.Second, true, 2 * time.Second},
		{"-delay 0: SIGKILL with SIGTERM", []string{"-delay", "0s"}, 0, true, 0},
		{"-kill-after past 5m: the longest delay, SIGKILL within it", []string{"-kill-after", "10m"}, 5 * time.Minute, true, 5*time.Minute - time.Second},
		{"-F: no kill window, the agent's lock.lock_delay", []string{"-F"}, 0, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseExecArgs(append(tc.args, "n", "--", "cmd"))
			if err != nil {
				t.Fatal(err)
			}
			d, send := o.lockDelay()
			if d != tc.delay || send != tc.sendsDelay {
				t.Errorf("lockDelay() = %v, %v; want %v, %v", d, send, tc.delay, tc.sendsDelay)
			}
			if w := o.killWindow(); w != tc.window {
				t.Errorf("killWindow() = %v, want %v", w, tc.window)
			}
		})
	}
}
