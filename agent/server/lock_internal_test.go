package server

import (
	"context"
	"errors"
	"testing"

	"github.com/lock-agent/lock-agent/protocol"
)

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
