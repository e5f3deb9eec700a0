package lockagent

import (
	"strconv"
	"time"
)

// Option adjusts a Lock call. Lock checks every option's value before
// sending anything; a bad one is an *ArgError.
type Option func(*lockOptions)

type lockOptions struct {
	wait    time.Duration
	hasWait bool
	ttl     time.Duration
	hasTTL  bool
	owner   string
	shared  bool
	limit   int
	hasLim  bool
	fair    bool

	value        string // as the caller gave it; encoded by lockLine
	notifyWanted bool
	delay        time.Duration
	hasDelay     bool
	minHold      time.Duration
	hasMinHold   bool
}

// Wait bounds how long Lock waits; after it Lock returns ErrBusy. Zero tries
// once; a negative d is an *ArgError (ErrInvalidArgument). Without Wait,
// Lock waits until granted or ctx ends. d is rounded up to whole milliseconds.
func Wait(d time.Duration) Option { return func(o *lockOptions) { o.wait, o.hasWait = d, true } }

// TTL makes the lock end by itself after d (1ms to one year, rounded up to
// whole milliseconds) unless extended, with Lock.Err() reporting reason
// "expired". Without it the agent keeps the lock for as long as this Client
// is connected.
func TTL(d time.Duration) Option { return func(o *lockOptions) { o.ttl, o.hasTTL = d, true } }

// Owner names the owner of the lock within this connection: 1-64 bytes of
// [A-Za-z0-9._:-]. Each Lock call is its own owner by default, so two
// goroutines contend even on one Client; calls that pass the same Owner
// re-enter each other's lock instead.
func Owner(id string) Option { return func(o *lockOptions) { o.owner = id } }

// Shared asks for a read hold: many shared holders, no exclusive one. An
// owner's shared Lock inside its exclusive hold re-enters it; an exclusive
// Lock inside its shared hold is ErrConflict (no upgrade).
func Shared() Option { return func(o *lockOptions) { o.shared = true } }

// Limit makes the name a semaphore of n slots (1 to 4096): at most n
// holders at once, cluster-wide, each on its own slot (Lock.Slot). Every
// holder must pass the same n; another n is ErrConflict at once.
func Limit(n int) Option { return func(o *lockOptions) { o.limit, o.hasLim = n, true } }

// Fair asks for the name in the order the requests arrived, across all
// agents (fair=true): a fair request is not passed by a later one. It goes
// with any other option; with Wait(0) it tries once and never queues.
// An agent that does not support fair queues yet answers ErrBadRequest.
func Fair() Option { return func(o *lockOptions) { o.fair = true } }

// lockLine checks name and o and formats the LOCK request.
func lockLine(name string, o lockOptions) (string, error) {
	if err := checkName(name); err != nil {
		return "", err
	}
	if err := checkOwner(o.owner); err != nil {
		return "", err
	}
	line := "LOCK " + name + " owner=" + o.owner
	if o.hasWait {
		if err := checkDuration("wait", o.wait, 0); err != nil {
			return "", err
		}
		line += " wait=" + durationArg(o.wait)
	}
	if o.hasTTL {
		if err := checkDuration("ttl", o.ttl, time.Millisecond); err != nil {
			return "", err
		}
		line += " ttl=" + durationArg(o.ttl)
	}
	if o.shared {
		line += " mode=shared"
	}
	if o.hasLim {
		if err := checkLimit(o.limit); err != nil {
			return "", err
		}
		line += " limit=" + strconv.Itoa(o.limit)
	}
	if o.fair {
		line += " fair=true"
	}
	more, err := coordinationOptions(o)
	if err != nil {
		return "", err
	}
	line += more
	return line, checkLine(line)
}
