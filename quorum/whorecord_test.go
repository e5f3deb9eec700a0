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

// TestALeaderValueIsTheOneAQuorumRecords: a proclaim's SET is answered
// once a quorum has it; a read whose answers differ on the value (one
// master the SET has not reached) does not know the leader's value yet,
// and an observer must not be pushed the old one after the new.
func TestALeaderValueIsTheOneAQuorumRecords(t *testing.T) {
	rec := func(value string) Record { return Record{Fence: 5, Who: Who{Owner: "h", Value: value}} }
	for _, tc := range []struct {
		name    string
		answers []Record
		lenient bool
		want    string
		ok      bool
	}{
		{"all three agree", []Record{rec("b"), rec("b"), rec("b")}, false, "b", true},
		{"the SET reached two of three", []Record{rec("a"), rec("b"), rec("b")}, false, "b", true},
		{"two answers that differ", []Record{rec("a"), rec("b")}, false, "", false},
		{"two answers that differ, lenient", []Record{rec("a"), rec("b")}, true, "a", true},
		{"two answers that agree", []Record{rec("b"), rec("b")}, false, "b", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := &holderVotes{first: tc.answers[0], byFence: map[int64]Record{}, fences: map[int64]int{}, values: map[string]int{}}
			for _, r := range tc.answers {
				v.note(r)
			}
			got, ok := v.settledValue(2, tc.lenient)
			if ok != tc.ok || ok && got != tc.want {
				t.Fatalf("settledValue = %q %v, want %q %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
