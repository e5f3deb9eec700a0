package lockagent

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors: one per wire error code, plus the client's own. Compare
// with errors.Is; the *Error a call returns carries the agent's text.
var (
	ErrBusy        = errors.New("lockagent: busy") // the wait ran out
	ErrBadRequest  = errors.New("lockagent: bad request")
	ErrUnknownVerb = errors.New("lockagent: unknown verb")
	ErrBadName     = errors.New("lockagent: bad name")
	ErrNotHeld     = errors.New("lockagent: not held")
	ErrNoQuorum    = errors.New("lockagent: no quorum")
	ErrConflict    = errors.New("lockagent: conflict")
	// ErrSettings: the agent's cluster settings (lease, drift, ...) differ
	// from those a majority of its masters records: it grants nothing until
	// they agree. The *Error's text names the settings.
	ErrSettings     = errors.New("lockagent: agent settings differ from the cluster's")
	ErrDenied       = errors.New("lockagent: denied")
	ErrLimit        = errors.New("lockagent: limit reached")
	ErrCancelled    = errors.New("lockagent: cancelled")
	ErrShuttingDown = errors.New("lockagent: agent shutting down")
	ErrInternal     = errors.New("lockagent: internal agent error")

	// ErrClosed: the connection to the agent is closed (by Close, or the agent went away).
	ErrClosed = errors.New("lockagent: connection closed")
	// ErrLost: a held lock ended without Unlock; Lock.Err says why.
	ErrLost = errors.New("lockagent: lock lost")
	// ErrUnlocked: Lock.Err after Unlock released the lock.
	ErrUnlocked = errors.New("lockagent: unlocked")
	// ErrInvalidArgument: the client refused a name, owner or option value
	// before sending anything; the *ArgError says which.
	ErrInvalidArgument = errors.New("lockagent: invalid argument")
	// ErrConnect: Dial could not reach the agent's socket.
	ErrConnect = errors.New("lockagent: cannot connect to the agent")
	// ErrNoLeader: Election.Leader found nobody leading (etcd's
	// ErrElectionNoLeader).
	ErrNoLeader = errors.New("lockagent: election: no leader")
	// ErrNotLeader: Election.Proclaim by an election that does not lead
	// (etcd's ErrElectionNotLeader).
	ErrNotLeader = errors.New("lockagent: election: not leader")
)

var byCode = map[string]error{
	"BAD_REQUEST":   ErrBadRequest,
	"UNKNOWN_VERB":  ErrUnknownVerb,
	"BAD_NAME":      ErrBadName,
	"NOT_HELD":      ErrNotHeld,
	"NO_QUORUM":     ErrNoQuorum,
	"CONFLICT":      ErrConflict,
	"SETTINGS":      ErrSettings,
	"DENIED":        ErrDenied,
	"LIMIT":         ErrLimit,
	"CANCELLED":     ErrCancelled,
	"SHUTTING_DOWN": ErrShuttingDown,
	"INTERNAL":      ErrInternal,
}

// Error is an ERR reply: its wire code and the agent's text.
type Error struct {
	Code string
	Msg  string
}

func (e *Error) Error() string { return "lockagent: " + e.Code + ": " + e.Msg }

// Is matches the sentinel of e's code, so errors.Is(err, ErrNoQuorum) works.
func (e *Error) Is(target error) bool {
	s, ok := byCode[e.Code]
	return ok && s == target
}

func errorFromReply(words []string) error {
	// words: ERR CODE text...
	if len(words) < 2 {
		return &Error{Code: "INTERNAL", Msg: "malformed error reply"}
	}
	code := words[1]
	if _, ok := byCode[code]; !ok {
		code = "INTERNAL"
	}
	return &Error{Code: code, Msg: strings.Join(words[2:], " ")}
}

// LostError says why a lock was lost. It matches ErrLost.
type LostError struct {
	Name, Owner string
	Fence       int64
	// Reason: quorum, expired, revoked, shutdown, or disconnected when the
	// connection to the agent dropped.
	Reason string
	// Why is, for a hold revoked with a reason word (RevokeOptions.Reason),
	// that word; "" otherwise.
	Why string
}

func (e *LostError) Error() string {
	if e.Why != "" {
		return "lockagent: lock " + e.Name + " lost: " + e.Reason + " (" + e.Why + ")"
	}
	return "lockagent: lock " + e.Name + " lost: " + e.Reason
}

// Is matches ErrLost, and ErrClosed when the connection dropped.
func (e *LostError) Is(target error) bool {
	return target == ErrLost || (target == ErrClosed && e.Reason == "disconnected")
}

// ArgError is an argument the client refused before writing anything to the
// agent: a name, owner or option value outside what protocol v1 accepts. It
// matches ErrInvalidArgument, and also ErrBadName for a name or ErrBadRequest
// for anything else, the errors the agent would have answered.
type ArgError struct {
	Arg   string // name, owner, wait, ttl, limit, client name, tag
	Value string
	Want  string
}

func (e *ArgError) Error() string {
	return fmt.Sprintf("lockagent: invalid %s %q: want %s", e.Arg, e.Value, e.Want)
}

func (e *ArgError) Is(target error) bool {
	switch target {
	case ErrInvalidArgument:
		return true
	case ErrBadName:
		return e.Arg == "name"
	case ErrBadRequest:
		return e.Arg != "name"
	}
	return false
}
