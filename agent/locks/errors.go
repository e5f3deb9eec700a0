package locks

import (
	"errors"

	"github.com/lock-agent/lock-agent/protocol"
	"github.com/lock-agent/lock-agent/quorum"
)

// The errors the manager and the server answer with.

// ErrAgentStopping refuses new sessions and requests, and ends waits,
// while the agent stops.
var ErrAgentStopping = protocol.Errorf(protocol.ErrShuttingDown, "agent is stopping")

// QuorumError is the answer for err from a round of the masters: a closed
// cluster (the agent is stopping) is SHUTTING_DOWN, a majority that records
// other settings SETTINGS, anything else NO_QUORUM. The chain is kept, so
// callers can still ask what it was.
func QuorumError(err error) error {
	if errors.Is(err, quorum.ErrClosed) {
		return &protocol.Error{Err: protocol.ErrShuttingDown, Msg: "agent is stopping", Cause: err}
	}
	// Kind, not errors.Is: a round that missed a majority for other causes
	// also wraps the refusals of masters that record other settings.
	if re := (*quorum.RoundError)(nil); errors.As(err, &re) && re.Kind == quorum.ErrSettings {
		return &protocol.Error{Err: protocol.ErrSettings, Msg: err.Error(), Cause: err}
	}
	return &protocol.Error{Err: protocol.ErrNoQuorum, Msg: err.Error(), Cause: err}
}
