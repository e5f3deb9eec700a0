package protocol

import "testing"

// TestPushesAreFormattedAsTheProtocolSays: each typed push as
// docs/protocol.md writes it, an empty owner and an absent why= included.
func TestPushesAreFormattedAsTheProtocolSays(t *testing.T) {
	for _, tc := range []struct {
		name string
		push interface{ Bytes() []byte }
		want string
	}{
		{"a hold lost for want of a quorum", Lost{Name: "jobs/q", Owner: "w1", Fence: 7, Reason: "quorum"},
			"* LOST jobs/q owner=w1 fence=7 reason=quorum\n"},
		{"a hold of the empty owner", Lost{Name: "report", Fence: 1795548022000000, Reason: "expired"},
			"* LOST report owner= fence=1795548022000000 reason=expired\n"},
		{"a revocation with the operator's word", Lost{Name: "jobs/nightly", Fence: 1795548235000000, Reason: "revoked", Why: "maintenance"},
			"* LOST jobs/nightly owner= fence=1795548235000000 reason=revoked why=maintenance\n"},
		{"a revocation without one", Lost{Name: "jobs/v", Fence: 1795548171000000, Reason: "revoked"},
			"* LOST jobs/v owner= fence=1795548171000000 reason=revoked\n"},
		{"a wanted hold", Wanted{Name: "jobs/q", Owner: "w1", Waiting: 3},
			"* WANTED jobs/q owner=w1 waiting=3\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(tc.push.Bytes()); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}
