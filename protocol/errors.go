package protocol

import (
	"errors"
	"fmt"
)

// Code is a wire error code, the word after ERR in a reply.
type Code string

// The error codes of protocol v1.
const (
	CodeBadRequest   Code = "BAD_REQUEST"
	CodeUnknownVerb  Code = "UNKNOWN_VERB"
	CodeBadName      Code = "BAD_NAME"
	CodeNotHeld      Code = "NOT_HELD"
	CodeNoQuorum     Code = "NO_QUORUM"
	CodeConflict     Code = "CONFLICT"
	CodeSettings     Code = "SETTINGS"
	CodeDenied       Code = "DENIED"
	CodeLimit        Code = "LIMIT"
	CodeCancelled    Code = "CANCELLED"
	CodeShuttingDown Code = "SHUTTING_DOWN"
	CodeInternal     Code = "INTERNAL"
)

// Sentinel errors, one per wire code. Code that answers a request wraps one
// of these (directly or with Errorf) so that CodeOf finds the right code.
var (
	ErrBadRequest  = errors.New("protocol: bad request")
	ErrUnknownVerb = errors.New("protocol: unknown verb")
	ErrBadName     = errors.New("protocol: bad name")
	ErrNotHeld     = errors.New("protocol: not held")
	ErrNoQuorum    = errors.New("protocol: no quorum")
	ErrConflict    = errors.New("protocol: conflict")
	// ErrSettings: a majority of masters records other cluster settings
	// than the agent's (lease, drift, ...): it grants nothing until they
	// agree. The text names the settings, the agent's and the masters'.
	ErrSettings     = errors.New("protocol: settings differ from the cluster's")
	ErrDenied       = errors.New("protocol: denied")
	ErrLimit        = errors.New("protocol: limit")
	ErrCancelled    = errors.New("protocol: cancelled")
	ErrShuttingDown = errors.New("protocol: shutting down")
)

// codes is the one table from errors to wire codes. Anything not in it is INTERNAL.
var codes = []struct {
	err  error
	code Code
}{
	{ErrBadRequest, CodeBadRequest},
	{ErrUnknownVerb, CodeUnknownVerb},
	{ErrBadName, CodeBadName},
	{ErrNotHeld, CodeNotHeld},
	{ErrNoQuorum, CodeNoQuorum},
	{ErrConflict, CodeConflict},
	{ErrSettings, CodeSettings},
	{ErrDenied, CodeDenied},
	{ErrLimit, CodeLimit},
	{ErrCancelled, CodeCancelled},
	{ErrShuttingDown, CodeShuttingDown},
}

// CodeOf returns the wire code for err: the code of the first sentinel that
// err wraps, or INTERNAL.
func CodeOf(err error) Code {
	for _, c := range codes {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return CodeInternal
}

// Error is a reply error: a sentinel that decides the code, and the free text
// the peer reads after it.
type Error struct {
	Err error
	Msg string
	// Cause, if not nil, is what led to it (a quorum error, say): errors.Is
	// still finds it, but the reply does not show it.
	Cause error
}

func (e *Error) Error() string { return e.Msg }
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is in the cause's chain. (Unwrap gives only the
// sentinel: an Unwrap() []error would allocate on every errors.Is, which
// the metrics on the request path may not.)
func (e *Error) Is(target error) bool { return e.Cause != nil && errors.Is(e.Cause, target) }

// Errorf returns an *Error wrapping sentinel with a formatted message.
func Errorf(sentinel error, format string, args ...any) error {
	return &Error{Err: sentinel, Msg: fmt.Sprintf(format, args...)}
}

// message is the free text of a reply for err: the message of an *Error, or
// the error's own text with no newlines.
func message(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Msg
	}
	return err.Error()
}
