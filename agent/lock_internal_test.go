package agent

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/lock-agent/lock-agent/protocol"
	"github.com/lock-agent/lock-agent/quorum"
)

func TestQuorumErrorKeepsTheChain(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want error
	}{
		{quorum.ErrClosed, protocol.ErrShuttingDown},
		{fmt.Errorf("acquire: %w", quorum.ErrClosed), protocol.ErrShuttingDown},
		{quorum.ErrNoQuorum, protocol.ErrNoQuorum},
		{errors.New("2 of 3 masters timed out"), protocol.ErrNoQuorum},
	} {
		got := quorumError(tc.err)
		if !errors.Is(got, tc.want) {
			t.Errorf("quorumError(%v) = %v, not %v", tc.err, got, tc.want)
		}
		if !errors.Is(got, tc.err) {
			t.Errorf("quorumError(%v) lost its cause", tc.err)
		}
	}
}

// TestAStoppedMultiLockSaysWhy: a multi-lock's wait ends with the reason
// its context gives (CANCEL, the session closing), and an agent stopping
// (its own context's plain cancellation) is SHUTTING_DOWN, not INTERNAL.
func TestAStoppedMultiLockSaysWhy(t *testing.T) {
	for _, tc := range []struct {
		cancel func(context.CancelCauseFunc)
		want   error
	}{
		{func(c context.CancelCauseFunc) { c(errCancelled) }, protocol.ErrCancelled},
		{func(c context.CancelCauseFunc) { c(errSessionGone) }, protocol.ErrCancelled},
		{func(c context.CancelCauseFunc) { c(nil) }, protocol.ErrShuttingDown},
	} {
		ctx, cancel := context.WithCancelCause(context.Background())
		tc.cancel(cancel)
		if err := stopped(ctx); !errors.Is(err, tc.want) {
			t.Errorf("stopped = %v, want %v", err, tc.want)
		}
	}
}
