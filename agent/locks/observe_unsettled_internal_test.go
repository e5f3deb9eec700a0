package locks

import (
	"errors"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/quorum"
)

func TestUnsettledSince(t *testing.T) {
	t0 := time.Unix(1000, 0)
	now := t0.Add(time.Second)
	x := unsettledSince{holder: "x", since: t0}
	unsettled := func(holder string) error { return &quorum.UnsettledError{Holder: holder} }
	tests := []struct {
		name string
		was  unsettledSince
		err  error
		want unsettledSince
	}{
		{"a read that settles ends it", x, nil, unsettledSince{}},
		{"the first unsettled holder starts it", unsettledSince{}, unsettled("x"), unsettledSince{"x", now}},
		{"the same holder again keeps its start", x, unsettled("x"), x},
		{"another holder starts it again", x, unsettled("y"), unsettledSince{"y", now}},
		{"a holder awaiting its agent counts as any", x, &quorum.UnsettledError{Holder: "y", Awaiting: true}, unsettledSince{"y", now}},
		{"a failed read says nothing of the holder", x, errors.New("no quorum"), x},
		{"nor does one that failed before any was unsettled", unsettledSince{}, errors.New("no quorum"), unsettledSince{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.was.after(tt.err, now); got != tt.want {
				t.Fatalf("after(%v) = %+v, want %+v", tt.err, got, tt.want)
			}
		})
	}
}
