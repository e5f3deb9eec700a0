package locks

import (
	"testing"

	"github.com/lock-agent/lock-agent/renewal"
)

// TestLostLineSaysTheReasonAndAnOperatorsWord: a LOST push says the loss's
// reason; a revocation's is always revoked, whatever the operator's word,
// which follows as why= unless it was none or revoked itself.
func TestLostLineSaysTheReasonAndAnOperatorsWord(t *testing.T) {
	h := &Hold{rh: &renewal.Hold{Name: "jobs/q"}, owner: "w1", fence: 7}
	for _, tc := range []struct {
		name string
		loss renewal.Loss
		want string
	}{
		{"renewals missed quorum", renewal.Loss{Reason: renewal.ReasonQuorum}, "* LOST jobs/q owner=w1 fence=7 reason=quorum"},
		{"a ttl= hold reached its end", renewal.Loss{Reason: renewal.ReasonExpired}, "* LOST jobs/q owner=w1 fence=7 reason=expired"},
		{"the agent is stopping", renewal.Loss{Reason: renewal.ReasonShutdown}, "* LOST jobs/q owner=w1 fence=7 reason=shutdown"},
		{"gone on a majority", renewal.Revocation(""), "* LOST jobs/q owner=w1 fence=7 reason=revoked"},
		{"revoked with the word revoked", renewal.Revocation("revoked"), "* LOST jobs/q owner=w1 fence=7 reason=revoked"},
		{"revoked by an operator", renewal.Revocation("maintenance"), "* LOST jobs/q owner=w1 fence=7 reason=revoked why=maintenance"},
		{"revoked with another reason's word", renewal.Revocation("quorum"), "* LOST jobs/q owner=w1 fence=7 reason=revoked why=quorum"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(LostLine(h, tc.loss)); got != tc.want+"\n" {
				t.Fatalf("lostLine = %q, want %q", got, tc.want+"\n")
			}
		})
	}
}
