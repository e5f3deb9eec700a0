package locks

import (
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
		got := QuorumError(tc.err)
		if !errors.Is(got, tc.want) {
			t.Errorf("quorumError(%v) = %v, not %v", tc.err, got, tc.want)
		}
		if !errors.Is(got, tc.err) {
			t.Errorf("quorumError(%v) lost its cause", tc.err)
		}
	}
}
