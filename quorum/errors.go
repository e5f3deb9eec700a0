package quorum

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/redis/rueidis"
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
	// ErrUnsettled: a majority records a holder, but the masters that
	// record it do not record the same fence of it yet (see Cluster.Leader).
	ErrUnsettled = errors.New("quorum: a holder's fence is not settled yet")
	// ErrUnsafe: the master is configured so that it may forget holds; see UnsafeError.
	ErrUnsafe = errors.New("quorum: unsafe master")
	// ErrConflict: a majority holds the name for another kind of claim (a
	// semaphore of another limit, or a lock against a semaphore).
	ErrConflict = errors.New("quorum: held with another limit")
	// ErrSettings: the master's epoch marker records other settings than
	// this agent's (see Settings): it does not vote for this agent. A round
	// that such refusals alone kept from a majority fails with it.
	ErrSettings = errors.New("quorum: settings differ from the cluster's")
	// ErrUnplanted: the master has no epoch marker (it is new, or lost its
	// data), and this agent does not know yet that a majority records its
	// settings, so it may not plant one (a minority agent's marker would
	// take the master out of the majority's service): it does not vote
	// until an agent that may plants it.
	ErrUnplanted = errors.New("quorum: master has no marker this agent may plant")
	// ErrOverloaded: a round waited its whole admission budget for a slot,
	// or a master has batchQueueMax calls waiting already (see master.go).
	ErrOverloaded = errors.New("quorum: overloaded")
)

// MasterError is an error from one master; it unwraps to the cause.
type MasterError struct {
	Master string
	Err    error
}

func (e *MasterError) Error() string { return e.Master + ": " + describe(e.Err) }
func (e *MasterError) Unwrap() error { return e.Err }

// NoAnswerError is a master that did not answer a round that waited for it
// that long: it unwraps to context.DeadlineExceeded.
type NoAnswerError struct {
	Waited time.Duration
}

func (e *NoAnswerError) Error() string {
	return "no answer in " + e.Waited.Round(time.Millisecond).String()
}

// Unwrap makes a NoAnswerError a deadline that passed.
func (e *NoAnswerError) Unwrap() error { return context.DeadlineExceeded }

// UnsafeError says why a master may forget holds, and so must not vote.
type UnsafeError struct {
	// Reason is one word-like token, e.g. "role:slave",
	// "connected_slaves:1", "maxmemory_policy:allkeys-lru".
	Reason string
}

func (e *UnsafeError) Error() string { return "unsafe master: " + e.Reason }

// Unwrap makes an UnsafeError match ErrUnsafe.
func (e *UnsafeError) Unwrap() error { return ErrUnsafe }

// token makes s one word: spaces become dashes.
func token(s string) string { return strings.ReplaceAll(strings.TrimSpace(s), " ", "-") }

// UnsettledError is ErrUnsettled of one holder (see Cluster.Leader): a
// reader that finds the same holder unsettled for long may take it at the
// fence its majority records (lenient), one that finds another holder
// unsettled each time may not.
type UnsettledError struct {
	Holder string // the holder's id
	// Awaiting says its grant awaits its agent's mark (see
	// awaitingAgent): no answer still to come can settle it, the agent's
	// mark will (it publishes), and lenient does not take it.
	Awaiting bool
}

func (e *UnsettledError) Error() string {
	if e.Awaiting {
		return ErrUnsettled.Error() + ": " + e.Holder + "'s grant awaits its agent"
	}
	return ErrUnsettled.Error() + ": " + e.Holder
}

func (e *UnsettledError) Unwrap() error { return ErrUnsettled }

// RoundError says why a quorum round failed. It unwraps to ErrNoQuorum,
// ErrBusy, ErrConflict or ErrSettings and to every master's error. An
// acquire's refusal is a Refusal, whose Err is a RoundError.
type RoundError struct {
	Kind    error // ErrNoQuorum, ErrBusy, ErrConflict or ErrSettings
	Yes     int   // masters that agreed
	Needed  int
	Masters []error
	// HeldLimit is, for ErrConflict, the limit the name is held with (1: a lock).
	HeldLimit int
	// Size is how many masters the cluster has (0: not said).
	Size int
}

func (e *RoundError) Error() string {
	var b strings.Builder
	switch e.Kind {
	case ErrBusy:
		b.WriteString("held by another")
	case ErrConflict:
		fmt.Fprintf(&b, "held with limit=%d", e.HeldLimit)
	case ErrSettings:
		// The settings say it all; each master's error would repeat them.
		ours, recorded := settingsRefusals(e.Masters)
		return DescribeRefusals(ours, recorded, e.Size)
	default:
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

// QuarantineReason is why a quarantined master does not vote, in the
// agent's words for STATUS and the log.
// It never suggests lock-agent bootstrap: a master that lost its data and
// is bootstrapped votes at once (see gate.go); Advice says more once the
// agent can tell which it is.
const QuarantineReason = "new or lost its data; quarantined until every hold it may have forgotten has ended"

// UnplantedReason is why a master with no marker that this agent may plant
// does not vote (see ErrUnplanted), in the agent's words.
const UnplantedReason = "new or lost its data; no marker yet: waits for an agent whose settings a majority records"

// redisErrors maps the first word of a Redis error reply to our words, so
// no server's text reaches a client: it may be long, change between
// versions, or carry key names.
var redisErrors = map[string]string{
	"NOPERM":      "refused by the master's ACL (NOPERM)",
	"NOAUTH":      "master wants authentication (NOAUTH)",
	"WRONGPASS":   "wrong username or password (WRONGPASS)",
	"OOM":         "master is out of memory (OOM)",
	"READONLY":    "master is a read-only replica (READONLY)",
	"LOADING":     "master is loading its data (LOADING)",
	"BUSY":        "master is busy running a script (BUSY)",
	"MASTERDOWN":  "master is down (MASTERDOWN)",
	"NOSCRIPT":    "script not loaded (NOSCRIPT)",
	"WRONGTYPE":   "a key under the key prefix has the wrong type (WRONGTYPE)",
	"CROSSSLOT":   "master is a Redis Cluster (CROSSSLOT)",
	"MOVED":       "master is a Redis Cluster (MOVED)",
	"CLUSTERDOWN": "master is a Redis Cluster (CLUSTERDOWN)",
	"MISCONF":     "master cannot persist its data (MISCONF)",
}

// describe says what went wrong with a master in the agent's words.
func describe(err error) string {
	var unsafe *UnsafeError
	var noAnswer *NoAnswerError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &unsafe):
		return unsafe.Error()
	case errors.Is(err, ErrQuarantined):
		return QuarantineReason
	case errors.Is(err, ErrUnplanted):
		return UnplantedReason
	case errors.Is(err, ErrSettings):
		return "records other settings: " + err.Error()
	case errors.As(err, &noAnswer):
		return noAnswer.Error()
	case errors.Is(err, context.DeadlineExceeded):
		return "timed out"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), errors.Is(err, rueidis.ErrClosing):
		return "connection closed"
	}
	if re, ok := rueidis.IsRedisErr(err); ok {
		word, _, _ := strings.Cut(re.Error(), " ")
		if d, ok := redisErrors[word]; ok {
			return d
		}
		return "master answered an error (" + token(word) + ")"
	}
	var op *net.OpError
	if errors.As(err, &op) {
		return "network error (" + op.Op + ")"
	}
	var me *MasterError
	if errors.As(err, &me) {
		return me.Error()
	}
	return err.Error()
}
