package quorum

import "testing"

func TestRenewChunkEnd(t *testing.T) {
	calls := func(n, each int) [][]int {
		out := make([][]int, n)
		for i := range out {
			out[i] = make([]int, each)
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		holds [][]int
		first int
		want  int
	}{
		{"a standalone master's full calls go renewChunk at a time", calls(40, renewBatch), 0, renewChunk},
		{"the next chunk starts where the last ended", calls(40, renewBatch), renewChunk, 2 * renewChunk},
		{"the last chunk ends with the calls", calls(20, renewBatch), renewChunk, 20},
		{"a cluster master's one-hold calls go as many as carry a chunk's holds", calls(10000, 1), 0, renewChunk * renewBatch},
		{"few one-hold calls go in one chunk", calls(2000, 1), 0, 2000},
		{"no call past the end", calls(3, 1), 3, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := renewChunkEnd(tc.holds, tc.first); got != tc.want {
				t.Errorf("renewChunkEnd(%d calls, %d) = %d, want %d", len(tc.holds), tc.first, got, tc.want)
			}
		})
	}
}
