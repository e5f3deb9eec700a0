package protocol

import (
	"strconv"
	"time"
)

// The verbs of protocol v1.
const (
	VerbHello  = "HELLO"
	VerbPing   = "PING"
	VerbLock   = "LOCK"
	VerbUnlock = "UNLOCK"
	VerbExtend = "EXTEND"
	VerbCancel = "CANCEL"
	VerbHolds  = "HOLDS"
	VerbStatus = "STATUS"
	VerbWho    = "WHO"
	VerbQuit   = "QUIT"

	// The verbs of ../shared/coordination.md.
	VerbSet       = "SET"
	VerbObserve   = "OBSERVE"
	VerbUnobserve = "UNOBSERVE"
	VerbRevoke    = "REVOKE"
	VerbCheck     = "CHECK"
)

// Mode is how a name is held.
type Mode string

// The lock modes.
const (
	Exclusive Mode = "exclusive"
	Shared    Mode = "shared"
)

// Hello is a parsed HELLO.
type Hello struct {
	Proto  int
	Client string
}

// Lock is a parsed LOCK. Wait is Forever unless given; TTL is 0 for a
// hold with no end of its own; Limit is 0 for a plain lock. Delay is
// NoDelay unless delay= was given (the agent's lock.lock_delay applies).
type Lock struct {
	Names []string
	Wait  time.Duration
	TTL   time.Duration
	Owner string
	Mode  Mode
	Limit int
	Fair  bool
	// Value is stored with the hold (value=; "" when none was given).
	Value string
	// NotifyWanted asks for * WANTED pushes (notify=wanted).
	NotifyWanted bool
	// Delay is how long the name stays unavailable after the hold ends
	// uncleanly (delay=), or NoDelay when not given.
	Delay time.Duration
	// MinHold is the least time from the grant that the name stays held
	// (min_hold=), 0 when not given.
	MinHold time.Duration
}

// NoDelay is Lock.Delay when the LOCK gave no delay=.
const NoDelay time.Duration = -1

// Bounds of the coordination options (../shared/coordination.md).
const (
	MaxTTL      = 30 * 24 * time.Hour
	MaxDelay    = 5 * time.Minute
	MaxMinHold  = 24 * time.Hour
	MaxValueLen = 512
)

// Set is a parsed SET: a new value for the hold of Name by Owner.
type Set struct {
	Name  string
	Value string
	Owner string
}

// Revoke is a parsed REVOKE: the holds of Name, all of them or those of
// Agent's agent, ended for Reason.
type Revoke struct {
	Name   string
	Agent  string
	Reason string
}

// Check is a parsed CHECK: is Fence the fence of a current holder of Name?
type Check struct {
	Name  string
	Fence uint64
}

// Unlock is a parsed UNLOCK. Mode is "" (undo the most recent acquisition)
// or Exclusive (undo the most recent exclusive one: a downgrade).
type Unlock struct {
	Names []string
	Owner string
	Mode  Mode
}

// Extend is a parsed EXTEND.
type Extend struct {
	Name  string
	TTL   time.Duration
	Owner string
}

// options walks r's options, calling set for each; a key set does not know is
// a BAD_REQUEST naming it.
func (r *Request) options(set map[string]func(v string) error) error {
	for _, o := range r.Opts {
		f, ok := set[o.Key]
		if !ok {
			return Errorf(ErrBadRequest, "unknown option %s for %s", clip(o.Key), r.Verb)
		}
		if err := f(o.Value); err != nil {
			return err
		}
	}
	return nil
}

// argCount checks the number of positional words.
func (r *Request) argCount(min, max int) error {
	if len(r.Args) < min {
		return Errorf(ErrBadRequest, "%s needs at least %d argument(s)", r.Verb, min)
	}
	if max >= 0 && len(r.Args) > max {
		return Errorf(ErrBadRequest, "%s takes at most %d argument(s)", r.Verb, max)
	}
	return nil
}

// NoArgs checks a request that takes neither words nor options (PING, HOLDS, STATUS, QUIT).
func (r *Request) NoArgs() error {
	if err := r.argCount(0, 0); err != nil {
		return err
	}
	return r.options(nil)
}

func names(args []string) ([]string, error) {
	for i, n := range args {
		if !ValidName(n) {
			return nil, Errorf(ErrBadName, "bad name %q: want 1-%d bytes of [A-Za-z0-9._:/@+-]", clip(n), MaxNameLen)
		}
		for _, m := range args[:i] {
			if m == n {
				return nil, Errorf(ErrBadRequest, "name %s given twice", n)
			}
		}
	}
	return args, nil
}

func owner(dst *string) func(string) error {
	return func(v string) error {
		if !ValidOwner(v) {
			return Errorf(ErrBadRequest, "bad owner %q: want 0-64 of [A-Za-z0-9._:-]", clip(v))
		}
		*dst = v
		return nil
	}
}

func positiveDuration(name string, dst *time.Duration) func(string) error {
	return func(v string) error {
		d, err := ParseDuration(v, false)
		if err != nil {
			return err
		}
		if d <= 0 {
			return Errorf(ErrBadRequest, "%s must be positive", name)
		}
		*dst = d
		return nil
	}
}

// ParseHello reads HELLO [proto=1] [client=NAME].
func ParseHello(r *Request) (Hello, error) {
	h := Hello{Proto: Version}
	if err := r.argCount(0, 0); err != nil {
		return h, err
	}
	err := r.options(map[string]func(string) error{
		"proto": func(v string) error {
			if v != strconv.Itoa(Version) {
				return Errorf(ErrBadRequest, "unsupported proto %q: this agent speaks %d", clip(v), Version)
			}
			return nil
		},
		"client": func(v string) error {
			if len(v) > 64 {
				return Errorf(ErrBadRequest, "client name longer than 64 bytes")
			}
			h.Client = v
			return nil
		},
	})
	return h, err
}

// boundedDuration reads a duration option of at most most; zero allowed.
func boundedDuration(name string, most time.Duration, dst *time.Duration) func(string) error {
	return func(v string) error {
		d, err := ParseDuration(v, false)
		if err != nil {
			return err
		}
		if d > most {
			return Errorf(ErrBadRequest, "%s %s is longer than %s", name, clip(v), most)
		}
		*dst = d
		return nil
	}
}

func value(dst *string) func(string) error {
	return func(v string) error {
		if !ValidValue(v) {
			return Errorf(ErrBadRequest, "bad value %q: want 0-%d bytes of [A-Za-z0-9._:/@+=%%,-] (percent-encode the rest)", clip(v), MaxValueLen)
		}
		*dst = v
		return nil
	}
}

// oneName reads a request of exactly one name.
func oneName(r *Request) (string, error) {
	if err := r.argCount(1, 1); err != nil {
		return "", err
	}
	n, err := names(r.Args)
	if err != nil {
		return "", err
	}
	return n[0], nil
}

// ParseLock reads LOCK NAME [NAME ...] [wait=] [ttl=] [owner=] [mode=]
// [limit=] [fair=] [value=] [notify=wanted] [delay=] [min_hold=].
func ParseLock(r *Request) (Lock, error) {
	l := Lock{Wait: Forever, Mode: Exclusive, Delay: NoDelay}
	if err := r.argCount(1, -1); err != nil {
		return l, err
	}
	var err error
	if l.Names, err = names(r.Args); err != nil {
		return l, err
	}
	for _, o := range r.Opts {
		if err := l.option(r.Verb, o.Key, o.Value); err != nil {
			return l, err
		}
	}
	return l, nil
}

// option sets one of a LOCK's options from its text. A switch, not a map
// of setters as the other verbs take: LOCK is every client's hot path,
// and a map of closures made per request cost it about a dozen
// allocations.
func (l *Lock) option(verb, key, v string) (err error) {
	switch key {
	case "wait":
		l.Wait, err = ParseDuration(v, true)
		return err
	case "ttl":
		if err := positiveDuration("ttl", &l.TTL)(v); err != nil {
			return err
		}
		if l.TTL > MaxTTL {
			return Errorf(ErrBadRequest, "ttl %s is longer than %s", clip(v), MaxTTL)
		}
		return nil
	case "owner":
		return owner(&l.Owner)(v)
	case "value":
		return value(&l.Value)(v)
	case "delay":
		return boundedDuration("delay", MaxDelay, &l.Delay)(v)
	case "min_hold":
		return boundedDuration("min_hold", MaxMinHold, &l.MinHold)(v)
	case "notify":
		if v != "wanted" {
			return Errorf(ErrBadRequest, "bad notify %q: want notify=wanted", clip(v))
		}
		l.NotifyWanted = true
		return nil
	case "mode":
		switch Mode(v) {
		case Exclusive, Shared:
			l.Mode = Mode(v)
			return nil
		}
		return Errorf(ErrBadRequest, "bad mode %q: want exclusive or shared", clip(v))
	case "limit":
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxLimit {
			return Errorf(ErrBadRequest, "bad limit %q: want 1 to %d", clip(v), MaxLimit)
		}
		l.Limit = n
		return nil
	case "fair":
		b, err := strconv.ParseBool(v)
		if err != nil {
			return Errorf(ErrBadRequest, "bad fair %q: want true or false", clip(v))
		}
		l.Fair = b
		return nil
	}
	return Errorf(ErrBadRequest, "unknown option %s for %s", clip(key), verb)
}

// MaxLimit is the most slots a semaphore (limit=) may have.
const MaxLimit = 4096

// ParseUnlock reads UNLOCK NAME [NAME ...] [owner=] [mode=exclusive].
func ParseUnlock(r *Request) (Unlock, error) {
	var u Unlock
	if err := r.argCount(1, -1); err != nil {
		return u, err
	}
	var err error
	if u.Names, err = names(r.Args); err != nil {
		return u, err
	}
	return u, r.options(map[string]func(string) error{
		"owner": owner(&u.Owner),
		"mode": func(v string) error {
			if Mode(v) != Exclusive {
				return Errorf(ErrBadRequest, "bad mode %q: UNLOCK takes mode=exclusive (a downgrade)", clip(v))
			}
			u.Mode = Exclusive
			return nil
		},
	})
}

// ParseExtend reads EXTEND NAME ttl=DUR [owner=].
func ParseExtend(r *Request) (Extend, error) {
	var e Extend
	if err := r.argCount(1, 1); err != nil {
		return e, err
	}
	n, err := names(r.Args)
	if err != nil {
		return e, err
	}
	e.Name = n[0]
	err = r.options(map[string]func(string) error{
		"ttl":   positiveDuration("ttl", &e.TTL),
		"owner": owner(&e.Owner),
	})
	if err == nil && e.TTL == 0 {
		err = Errorf(ErrBadRequest, "EXTEND needs ttl=")
	}
	return e, err
}

// ParseCancel reads CANCEL TAG2 and returns TAG2.
func ParseCancel(r *Request) (string, error) {
	if err := r.argCount(1, 1); err != nil {
		return "", err
	}
	if !validTag(r.Args[0]) {
		return "", Errorf(ErrBadRequest, "bad tag %q", clip(r.Args[0]))
	}
	return r.Args[0], r.options(nil)
}

// ParseWho reads WHO NAME.
func ParseWho(r *Request) (string, error) {
	n, err := oneName(r)
	if err != nil {
		return "", err
	}
	return n, r.options(nil)
}

// ParseObserve reads OBSERVE NAME or UNOBSERVE NAME.
func ParseObserve(r *Request) (string, error) { return ParseWho(r) }

// ParseSet reads SET NAME value=V [owner=].
func ParseSet(r *Request) (Set, error) {
	var s Set
	var err error
	if s.Name, err = oneName(r); err != nil {
		return s, err
	}
	given := false
	err = r.options(map[string]func(string) error{
		"value": func(v string) error { given = true; return value(&s.Value)(v) },
		"owner": owner(&s.Owner),
	})
	if err == nil && !given {
		err = Errorf(ErrBadRequest, "SET needs value=")
	}
	return s, err
}

// ParseRevoke reads REVOKE NAME [agent=A] [reason=WORD]. Reason is
// "revoked" unless given.
func ParseRevoke(r *Request) (Revoke, error) {
	v := Revoke{Reason: "revoked"}
	var err error
	if v.Name, err = oneName(r); err != nil {
		return v, err
	}
	return v, r.options(map[string]func(string) error{
		"agent": func(a string) error {
			if !ValidAgentID(a) {
				return Errorf(ErrBadRequest, "bad agent %q: want an agent id (1-255 printable bytes, no =)", clip(a))
			}
			v.Agent = a
			return nil
		},
		"reason": func(w string) error {
			if !validWord(w) {
				return Errorf(ErrBadRequest, "bad reason %q: want one word of 1-32 of [a-z0-9_]", clip(w))
			}
			v.Reason = w
			return nil
		},
	})
}

// ParseCheck reads CHECK NAME fence=F.
func ParseCheck(r *Request) (Check, error) {
	var c Check
	var err error
	if c.Name, err = oneName(r); err != nil {
		return c, err
	}
	err = r.options(map[string]func(string) error{
		"fence": func(v string) error {
			f, err := strconv.ParseUint(v, 10, 64)
			if err != nil || f == 0 {
				return Errorf(ErrBadRequest, "bad fence %q: want a positive integer", clip(v))
			}
			c.Fence = f
			return nil
		},
	})
	if err == nil && c.Fence == 0 {
		err = Errorf(ErrBadRequest, "CHECK needs fence=")
	}
	return c, err
}
