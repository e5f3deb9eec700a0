package quorum

import "testing"

// TestRoundDecidedByItsKind: a round stops reading answers when DecideSlots
// is sure of its outcome, a round that lands once a majority agreed, and a
// round that reads every answer never early.
func TestRoundDecidedByItsKind(t *testing.T) {
	c, err := New(Config{Masters: make([]MasterConfig, 3)})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		spec    roundSpec
		granted map[int]int
		failed  int
		refused int
		want    bool
	}{
		{"a round is decided once a majority granted one slot", roundSpec{}, map[int]int{0: 2}, 0, 0, true},
		{"a round is decided once a majority failed or refused", roundSpec{}, map[int]int{}, 1, 1, true},
		{"a split vote with an answer to come is not decided", roundSpec{}, map[int]int{1: 1, 2: 1}, 0, 0, false},
		{"a split vote with every answer in is decided", roundSpec{}, map[int]int{1: 1, 2: 1}, 1, 0, true},
		{"a round that reads every answer is not decided by a majority", roundSpec{whole: true}, map[int]int{0: 3}, 0, 0, false},
		{"a round that lands is decided once a majority agreed", roundSpec{land: true}, map[int]int{0: 2}, 0, 0, true},
		{"a round that lands waits on though a majority failed", roundSpec{land: true}, map[int]int{0: 1}, 2, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &round{granted: tt.granted, failed: tt.failed}
			if got := c.decided(tt.spec, r, tt.refused); got != tt.want {
				t.Fatalf("decided = %v, want %v", got, tt.want)
			}
		})
	}
}
