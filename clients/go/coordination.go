package lockagent

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The bounds of the coordination options, as the agent has them.
const (
	maxTTL     = 30 * 24 * time.Hour
	maxDelay   = 5 * time.Minute
	maxMinHold = 24 * time.Hour
)

// Value attaches v to the hold: any text (a URL, host:port, JSON), at most
// 512 bytes once percent-encoded (the client encodes every byte outside
// [A-Za-z0-9._:/@+=,-] as %XX, and decodes values it reads back). WHO shows
// it (Holder.Value), and observers of the name see it (Leader.Value). An
// empty v attaches nothing.
func Value(v string) Option { return func(o *lockOptions) { o.value = v } }

// NotifyWanted asks the agent to tell this hold when a conflicting request
// for its name starts waiting, on any agent: Lock.Wanted then receives. A
// holder can finish early and Unlock (cooperative revocation).
func NotifyWanted() Option { return func(o *lockOptions) { o.notifyWanted = true } }

// Delay keeps the name unavailable to everyone for d after this hold ends
// uncleanly (its connection closed without Unlock, its process died, it was
// lost or revoked), so that the dead holder's last writes land before the
// next holder starts. A clean Unlock ends the hold at once. 0 to 5 minutes,
// rounded up to whole milliseconds; without Delay the agent's
// lock.lock_delay applies (default 0), and Delay(0) overrides it.
func Delay(d time.Duration) Option { return func(o *lockOptions) { o.delay, o.hasDelay = d, true } }

// MinHold keeps the name held by nobody until d after the grant when the
// hold ends earlier: "run at most once per d" across hosts whose clocks
// differ. 0 to 24 hours, rounded up to whole milliseconds.
func MinHold(d time.Duration) Option {
	return func(o *lockOptions) { o.minHold, o.hasMinHold = d, true }
}

// coordinationOptions formats value=, notify=, delay= and min_hold=.
func coordinationOptions(o lockOptions) (string, error) {
	var line string
	if o.value != "" {
		enc, err := checkValue(o.value)
		if err != nil {
			return "", err
		}
		line += " value=" + enc
	}
	if o.notifyWanted {
		line += " notify=wanted"
	}
	if o.hasDelay {
		if err := checkBounded("delay", o.delay, maxDelay, "0 to 5 minutes"); err != nil {
			return "", err
		}
		line += " delay=" + durationArg(o.delay)
	}
	if o.hasMinHold {
		if err := checkBounded("min_hold", o.minHold, maxMinHold, "0 to 24 hours"); err != nil {
			return "", err
		}
		line += " min_hold=" + durationArg(o.minHold)
	}
	return line, nil
}

func checkBounded(arg string, d, most time.Duration, want string) error {
	if d < 0 || d > most {
		return &ArgError{Arg: arg, Value: d.String(), Want: want}
	}
	return nil
}

// checkLine refuses a request the agent would not read as one line: it
// would close the connection, and every hold of it with it.
func checkLine(line string) error {
	if most := maxLine - maxTagLen - 1; len(line) > most {
		return &ArgError{Arg: "request", Value: clip(line), Want: "at most " + strconv.Itoa(most) +
			" bytes in one line (" + strconv.Itoa(len(line)) + " here): fewer or shorter names, or a shorter value"}
	}
	return nil
}

// Wanted receives when a conflicting request for the lock's name started
// waiting, on any agent, if the lock was taken with NotifyWanted (else it
// never receives). Signals coalesce: one is pending at most, and the agent
// sends at most one per 100ms while the lock stays wanted.
func (l *Lock) Wanted() <-chan struct{} { return l.wanted }

func (l *Lock) want() {
	select {
	case l.wanted <- struct{}{}:
	default:
	}
}

// Value returns the lock's value as given to Value or Proclaim ("" if none).
func (l *Lock) Value() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.value
}

// Campaign runs for leader of name: a fair Lock (candidates are elected in
// the order they arrived, across agents) carrying value, which observers of
// the name see. It returns once elected; the lock's fence is the term,
// strictly increasing per name. Resign with Unlock; leadership ends as any
// hold does (Done, Context). opts are Lock's (Wait bounds the campaign).
func (c *Client) Campaign(ctx context.Context, name, value string, opts ...Option) (*Lock, error) {
	return c.Lock(ctx, name, append(opts, Fair(), Value(value))...)
}

// Proclaim replaces the lock's value; observers see the change. It returns
// once a majority of masters has it; an error matching ErrNotHeld if the
// lock was unlocked, its *LostError if it was lost.
func (l *Lock) Proclaim(ctx context.Context, value string) error {
	if err := l.Err(); errors.Is(err, ErrUnlocked) {
		return fmt.Errorf("%w: %s was unlocked", ErrNotHeld, l.name)
	} else if err != nil {
		return err
	}
	enc, err := checkValue(value)
	if err != nil {
		return err
	}
	if _, err := l.c.do(ctx, "SET "+l.name+" value="+enc+" owner="+l.owner); err != nil {
		return err
	}
	l.mu.Lock()
	l.value = value
	l.mu.Unlock()
	return nil
}

// Check reports whether fence is the fence of a current holder of name, as a
// majority of masters records it: what a resource handed a fence can ask
// before it acts on a request carrying it. fence must be positive. For a name
// cached by another agent, a fence whose holder let go may read current for
// up to a renewal tick (see docs/protocol.md, CHECK); to refuse a holder the
// moment it lets go, compare fences.
func (c *Client) Check(ctx context.Context, name string, fence int64) (bool, error) {
	if err := checkName(name); err != nil {
		return false, err
	}
	if fence <= 0 {
		return false, &ArgError{Arg: "fence", Value: strconv.FormatInt(fence, 10), Want: "a positive fence"}
	}
	r, err := c.do(ctx, "CHECK "+name+" fence="+strconv.FormatInt(fence, 10))
	if err != nil {
		return false, err
	}
	return r.fields["current"] == "true", nil
}

// RevokeOptions narrow a Revoke.
type RevokeOptions struct {
	// Agent revokes only the holds of that agent (its agent.id); "" revokes
	// every hold of the name.
	Agent string
	// Reason is a word (1-32 of [a-z0-9_]) that each holder's lost lock
	// carries as LostError.Why; its Reason is "revoked" whatever this says.
	Reason string
}

// Revoke ends the holds of name wherever they are (an operator's verb: the
// agent allows it only by an ACL rule granting "revoke", or to root without
// an acl block; else ErrDenied). Each holder gets its lock lost with
// LostError.Reason "revoked" (and Why o.Reason) before the name is released.
// It returns how many holds it ended.
func (c *Client) Revoke(ctx context.Context, name string, o RevokeOptions) (int, error) {
	if err := checkName(name); err != nil {
		return 0, err
	}
	line := "REVOKE " + name
	if o.Agent != "" {
		if !checkAgentID(o.Agent) {
			return 0, &ArgError{Arg: "agent", Value: o.Agent, Want: "an agent id: 1-255 printable bytes, no space or ="}
		}
		line += " agent=" + o.Agent
	}
	if o.Reason != "" {
		if !checkReason(o.Reason) {
			return 0, &ArgError{Arg: "reason", Value: o.Reason, Want: "one word of 1-32 of [a-z0-9_]"}
		}
		line += " reason=" + o.Reason
	}
	r, err := c.do(ctx, line)
	if err != nil {
		return 0, err
	}
	return atoi(r.fields["n"]), nil
}

func checkAgentID(s string) bool {
	if len(s) == 0 || len(s) > 255 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || c == '=' {
			return false
		}
	}
	return true
}

func checkReason(s string) bool {
	return len(s) <= 32 && checkWord(strings.ToLower(s), 32, "_") && s == strings.ToLower(s)
}
