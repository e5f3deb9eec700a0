package quorum

import (
	"slices"
	"testing"
)

func TestSettleFence(t *testing.T) {
	cases := []struct {
		name    string
		fences  []int64
		fence   int64
		atFence int
		behind  []int
	}{
		{"a majority in step settles on its fence", []int64{7, 7, 0}, 7, 2, nil},
		{"the highest fence wins and the granting masters below it are behind", []int64{7, 9, 0}, 9, 1, []int{0}},
		{"a master that did not grant is not behind", []int64{0, 5, 3}, 5, 1, []int{2}},
		{"every master in step", []int64{4, 4, 4}, 4, 3, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fence, atFence, behind := SettleFence(tc.fences)
			if fence != tc.fence || atFence != tc.atFence || !slices.Equal(behind, tc.behind) {
				t.Fatalf("SettleFence(%v) = %d, %d, %v; want %d, %d, %v", tc.fences, fence, atFence, behind, tc.fence, tc.atFence, tc.behind)
			}
		})
	}
}
