package status

import (
	"strings"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/quorum"
)

func TestStatusLineSaysWhyAMasterDoesNotVote(t *testing.T) {
	const recorded = "lease=15s;drift=0.01"
	for _, tc := range []struct {
		name string
		m    quorum.MasterStatus
		want string
	}{
		{"a master that votes says nothing more",
			quorum.MasterStatus{Name: "a", Address: "h:1", State: quorum.StateUp, Settings: recorded},
			"1 DATA master=a address=h:1 state=up settings=" + recorded},
		{"a quarantined master says how long is left",
			quorum.MasterStatus{Name: "a", Address: "h:1", State: quorum.StateQuarantined, Err: quorum.QuarantineReason, QuarantineLeft: 1500 * time.Millisecond, Data: quorum.DataLost},
			"1 DATA master=a address=h:1 state=quarantined quarantine_left=1500 reason=new_or_lost_its_data data=lost"},
		{"a quarantined master the agent cannot tell says so",
			quorum.MasterStatus{Name: "a", Address: "h:1", State: quorum.StateQuarantined, Err: quorum.QuarantineReason, QuarantineLeft: 1500 * time.Millisecond},
			"1 DATA master=a address=h:1 state=quarantined quarantine_left=1500 reason=new_or_lost_its_data data=unknown"},
		{"a master with no marker yet has no quarantine to count down",
			quorum.MasterStatus{Name: "a", Address: "h:1", State: quorum.StateQuarantined, Err: quorum.UnplantedReason, Unplanted: true},
			"1 DATA master=a address=h:1 state=quarantined reason=no_marker_yet data=unknown"},
		{"a master that records other settings shows them",
			quorum.MasterStatus{Name: "a", Address: "h:1", State: quorum.StateSettings, Err: "records other settings", Settings: recorded},
			"1 DATA master=a address=h:1 state=settings reason=records_other_settings settings=" + recorded},
		{"a down master's reason is one word",
			quorum.MasterStatus{Name: "a", Address: "h:1", State: quorum.StateDown, Err: "timed out"},
			"1 DATA master=a address=h:1 state=down reason=timed_out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := strings.TrimSuffix(string(Master("1", tc.m).Bytes()), "\n"); got != tc.want {
				t.Errorf("Master =\n  %s\nwant\n  %s", got, tc.want)
			}
		})
	}
}
