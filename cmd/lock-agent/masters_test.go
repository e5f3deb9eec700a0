package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
)

// TestValidateSaysWhatAMasterCountBuys: validate accepts any count of
// masters and says how many may fail; one (or two) gives no fault
// tolerance, and an even count buys nothing over one fewer.
func TestValidateSaysWhatAMasterCountBuys(t *testing.T) {
	for _, tc := range []struct {
		name    string
		masters int
		want    []string
	}{
		{"one master is valid but tolerates no failure", 1,
			[]string{"valid (one master, quorum 1, no fault tolerance,", "note: one master gives no fault tolerance", "sits out its quarantine"}},
		{"two masters tolerate no failure either", 2, []string{"valid (2 masters, quorum 2, no fault tolerance,", "note: 2 masters give no fault tolerance"}},
		{"three masters tolerate one", 3, []string{"valid (3 masters, quorum 2, tolerates 1 down,"}},
		{"four masters tolerate no more than three", 4,
			[]string{"valid (4 masters, quorum 3, tolerates 1 down,", "note: 4 masters tolerate no more failures than 3 would"}},
		{"five masters tolerate two", 5, []string{"valid (5 masters, quorum 3, tolerates 2 down,"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hcl strings.Builder
			for i := range tc.masters {
				fmt.Fprintf(&hcl, "redis \"m%d\" { address = \"10.0.0.%d:6379\" }\n", i, i+1)
			}
			path := filepath.Join(t.TempDir(), "agent.hcl")
			if err := os.WriteFile(path, []byte(hcl.String()), 0o600); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			if code := validateCmd([]string{"-config", path}, &stdout, &stderr); code != exitOK {
				t.Fatalf("validate: exit %d\n%s", code, stderr.String())
			}
			for _, want := range tc.want {
				if !strings.Contains(stdout.String(), want) {
					t.Errorf("validate printed:\n%s\nwant %q in it", stdout.String(), want)
				}
			}
			if noted := strings.Contains(stdout.String(), "note:"); noted != (len(tc.want) > 1) {
				t.Errorf("validate printed:\n%s\na note: %v, want %v", stdout.String(), noted, len(tc.want) > 1)
			}
		})
	}
}

// TestStatusSaysOneMasterGivesNoFaultTolerance: status shows STATUS's
// tolerates=, and with none says what a failure of the master costs.
func TestStatusSaysOneMasterGivesNoFaultTolerance(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reply []string
		want  string
		warns bool
	}{
		{"one master", []string{
			"DATA master=a address=h:1 state=up",
			"OK agent=0.1.0 id=solo sessions=0 holds=0 waiters=0 quorum=1 tolerates=0 settings=lease=15s",
		}, "1/1 masters up (quorum 1, no fault tolerance, ok)", true},
		{"five masters, two down", []string{
			"DATA master=a address=h:1 state=down reason=timed_out",
			"DATA master=b address=h:2 state=down reason=timed_out",
			"DATA master=c address=h:3 state=up",
			"DATA master=d address=h:4 state=up",
			"DATA master=e address=h:5 state=up",
			"OK agent=0.1.0 id=five sessions=0 holds=0 waiters=0 quorum=3 tolerates=2 settings=lease=15s",
		}, "3/5 masters up (quorum 3, tolerates 2 down, ok)", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := lockagenttest.StartFake(t, func(string, []string) []string { return tc.reply })
			var stdout, stderr bytes.Buffer
			if code := statusCmd([]string{"-socket", fake.Path}, &stdout, &stderr); code != exitOK {
				t.Fatalf("status: exit %d\n%s%s", code, stdout.String(), stderr.String())
			}
			if !strings.Contains(stdout.String(), tc.want) {
				t.Errorf("status printed:\n%s\nwant %q in it", stdout.String(), tc.want)
			}
			if warned := strings.Contains(stdout.String(), "no master may fail"); warned != tc.warns {
				t.Errorf("status printed:\n%s\nwarned %v, want %v", stdout.String(), warned, tc.warns)
			}
		})
	}
}
