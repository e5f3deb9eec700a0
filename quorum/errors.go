package quorum

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors of the quorum package.
var (
	// ErrNoQuorum: fewer than a majority of masters could be reached or agreed
	// in time. Nothing is held.
	ErrNoQuorum = errors.New("quorum: no quorum")
	// ErrBusy: a majority answered that someone else holds the name.
	ErrBusy = errors.New("quorum: held by another")
	// ErrNotConnected: the master has no connection yet.
	ErrNotConnected = errors.New("quorum: not connected")
	// ErrMasterDown: the master is marked down by its health probe and is skipped.
	ErrMasterDown = errors.New("quorum: master down")
	// ErrQuarantined: the master lost its data and does not vote until every
	// lease it could have granted has ended.
	ErrQuarantined = errors.New("quorum: master quarantined")
	// ErrClosed: the cluster is closed.
	ErrClosed = errors.New("quorum: closed")
)

// MasterError is an error from one master; it unwraps to the cause.
type MasterError struct {
	Master string
	Err    error
}

func (e *MasterError) Error() string { return e.Master + ": " + e.Err.Error() }
func (e *MasterError) Unwrap() error { return e.Err }

// RoundError says why a quorum round failed. It unwraps to ErrNoQuorum or
// ErrBusy and to every master's error.
type RoundError struct {
	Kind    error // ErrNoQuorum or ErrBusy
	Yes     int   // masters that agreed
	Needed  int
	Masters []error
	// RetryAfter is, for ErrBusy, how long until the other holder's lease
	// runs out on the masters: the fallback wake-up of a waiter.
	RetryAfter int64 // milliseconds
}

func (e *RoundError) Error() string {
	var b strings.Builder
	if e.Kind == ErrBusy {
		b.WriteString("held by another")
	} else {
		fmt.Fprintf(&b, "%d of %d needed masters agreed", e.Yes, e.Needed)
	}
	for i, m := range e.Masters {
		if i == 0 {
			b.WriteString(" (")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(m.Error())
		if i == len(e.Masters)-1 {
			b.WriteString(")")
		}
	}
	return b.String()
}

func (e *RoundError) Unwrap() []error { return append([]error{e.Kind}, e.Masters...) }
