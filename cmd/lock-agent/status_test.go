package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
)

// TestStatusSaysWhyMastersDoNotVote: a quarantined master is "new or lost
// its data" with the time left and names lock-agent bootstrap; a master
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
		"new or lost its data; votes again in 4.5s (a new deployment: lock-agent bootstrap)",
	} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("status printed:\n%s\nwant %q in it", stdout.String(), want)
		}
	}
}
