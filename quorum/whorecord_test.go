package quorum

import "testing"

// TestWhoShowsTheHolderWrittenWithItsFence: a retag that missed one master
// leaves it the previous holder's who beside the previous fence; a WHO
// that read that master first showed the new fence (the majority's) with
// the previous holder's who (TestRetagNamesTheNewHolderOfALiveRecordOnly,
// beside two CPU hogs). The who shown is the one written with the fence.
func TestWhoShowsTheHolderWrittenWithItsFence(t *testing.T) {
	old := Record{Fence: 10, Who: Who{Agent: "a", Owner: "first"}}
	retagged := Record{Fence: 11, Who: Who{Agent: "a", PID: 7, Owner: "second"}}
	for _, tc := range []struct {
		name    string
		answers []Record
		want    Record
	}{
		{"the master the retag missed answered first", []Record{old, retagged, retagged}, retagged},
		{"a retagged master answered first", []Record{retagged, old, retagged}, retagged},
		{"no retag", []Record{old, old}, old},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := &holderVotes{first: tc.answers[0], byFence: map[int64]Record{}, fences: map[int64]int{}, values: map[string]int{}}
			for _, r := range tc.answers {
				v.note(r)
			}
			fence := v.majorityFence(2)
			if got := v.recordAt(fence); fence != tc.want.Fence || got.Who != tc.want.Who {
				t.Fatalf("fence %d with %+v, want %d with %+v", fence, got.Who, tc.want.Fence, tc.want.Who)
			}
		})
	}
}
