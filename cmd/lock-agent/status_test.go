package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
)

// TestStatusSaysWhyMastersDoNotVote: a quarantined master says the time
// left and what to do (see TestStatusAdviceIsSafe); a master
// that records other settings says which, and while a majority does the
// agent is said to grant nothing, with the settings that differ, and
// status exits 3.
func TestStatusSaysWhyMastersDoNotVote(t *testing.T) {
	const ours, theirs = "lease=20s;drift=0.01", "lease=15s;drift=0.01"
	fake := lockagenttest.StartFake(t, func(string, []string) []string {
		return []string{
			"DATA master=a address=h:1 state=settings reason=records_other_settings settings=" + theirs,
			"DATA master=b address=h:2 state=settings reason=records_other_settings settings=" + theirs,
			"DATA master=c address=h:3 state=quarantined quarantine_left=4500 reason=new_or_lost_its_data",
			"OK agent=0.1.0 id=web-7 sessions=1 holds=0 waiters=0 quorum=2 settings=" + ours + " settings_differ=lease",
		}
	})
	var stdout, stderr bytes.Buffer
	if code := statusCmd([]string{"-socket", fake.Path}, &stdout, &stderr); code != exitNoQuorum {
		t.Fatalf("status: exit %d, want %d\n%s%s", code, exitNoQuorum, stdout.String(), stderr.String())
	}
	for _, want := range []string{
		"SETTINGS DIFFER",
		"this agent grants nothing: its settings differ from the cluster's: lease=20s here, the masters record lease=15s (on 2 of 3)",
		"records other settings: lease=20s here, it records lease=15s",
		"votes again in 4.5s; new or lost its data (this agent cannot tell): wait; never lock-agent bootstrap a master that may have served locks",
	} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("status printed:\n%s\nwant %q in it", stdout.String(), want)
		}
	}
}

// TestStatusAdviceIsSafe: status suggests lock-agent bootstrap only for a
// new deployment (data=new); for a master that lost its data, or that the
// agent cannot tell (data=unknown, or an agent older than data=), it says
// to wait and never to bootstrap. (It used to say "a new deployment:
// lock-agent bootstrap" for a master restarted empty.)
func TestStatusAdviceIsSafe(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		want       string
		bootstrap  bool // the advice may suggest bootstrap
	}{
		{"a master that lost its data", "state=quarantined quarantine_left=12192 reason=new_or_lost_its_data data=lost",
			"votes again in 12.192s; it lost its data (restarted empty, flushed or restored) or joined a deployment that served: wait", false},
		{"a master the agent cannot tell", "state=quarantined quarantine_left=1000 reason=new_or_lost_its_data data=unknown",
			"votes again in 1s; new or lost its data (this agent cannot tell): wait", false},
		{"an agent older than data=", "state=quarantined quarantine_left=1000 reason=new_or_lost_its_data",
			"votes again in 1s; new or lost its data (this agent cannot tell): wait", false},
		{"no marker yet, lost", "state=quarantined reason=no_marker_yet data=lost",
			"no marker yet: waits for an agent whose settings a majority records; it lost its data", false},
		{"no marker yet, cannot tell", "state=quarantined reason=no_marker_yet data=unknown",
			"no marker yet: waits for an agent whose settings a majority records; new or lost its data (this agent cannot tell): wait", false},
		{"a settings change", "state=quarantined quarantine_left=2000 reason=new_or_lost_its_data data=changed",
			"votes again in 2s; the cluster's settings were changed (lock-agent settings): wait", false},
		{"a new deployment", "state=quarantined quarantine_left=3000 reason=new_or_lost_its_data data=new",
			"votes again in 3s; a new deployment (no master had a marker; none has voted yet): wait; next time, lock-agent bootstrap", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := lockagenttest.StartFake(t, func(string, []string) []string {
				return []string{
					"DATA master=a address=h:1 state=up",
					"DATA master=b address=h:2 state=up",
					"DATA master=c address=h:3 " + tc.line,
					"OK agent=0.1.0 id=web-7 sessions=1 holds=0 waiters=0 quorum=2 tolerates=0",
				}
			})
			var stdout, stderr bytes.Buffer
			statusCmd([]string{"-socket", fake.Path}, &stdout, &stderr)
			out := stdout.String()
			if !strings.Contains(out, tc.want) {
				t.Errorf("status printed:\n%s\nwant %q in it", out, tc.want)
			}
			if rest := strings.ReplaceAll(out, "never lock-agent bootstrap", ""); !tc.bootstrap && strings.Contains(rest, "bootstrap") {
				t.Errorf("status suggests bootstrap:\n%s", out)
			}
		})
	}
}
