package lockagent

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Election is a leader election on one name, shaped as etcd's
// concurrency.Election: Campaign, Proclaim, Resign, Leader, Observe and Rev
// (the term, a fence). A term is a fair Lock of the name carrying the
// leader's value (see Client.Campaign); it ends with Resign, when the
// Client closes, or when the hold is lost (Lock().Done closes then).
//
// Every Election of one name on one Client is the same candidate, as
// etcd's Elections of one prefix on one Session are: a Campaign through
// any of them returns at once while one of them leads (proclaiming the new
// value), and Resign through any of them ends the term.
//
// Where it differs from etcd: Resign does not depend on its context (the
// UNLOCK is sent even when ctx is done, as Lock.Unlock does), so a Resign
// with a cancelled context still resigns; Observe's values carry the term
// (Leader.Fence) instead of a revision; a Resign during a Campaign that has
// not won yet resigns nothing (cancel the Campaign's context instead).
type Election struct {
	c     *Client
	name  string
	opts  []Option
	state *candidacy
}

// candidacy is a Client's candidate for one name, shared by its Elections.
type candidacy struct {
	mu       sync.Mutex
	term     *Lock         // the term held, nil while not leading
	campaign chan struct{} // closed when the Campaign under way ends; nil when none is
}

// NewElection returns the election of name on c. opts are Lock's, given to
// every Campaign (Wait bounds it; Fair and Value are set by Campaign).
func NewElection(c *Client, name string, opts ...Option) *Election {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.elections[name]
	if st == nil {
		st = &candidacy{}
		c.elections[name] = st
	}
	return &Election{c: c, name: name, opts: opts, state: st}
}

// leadingLocked returns the term held, or nil; st.mu is held. A term that ended
// (lost, or unlocked through Lock) is forgotten.
func (st *candidacy) leadingLocked() *Lock {
	if st.term != nil && st.term.Err() != nil {
		st.term = nil
	}
	return st.term
}

// Campaign runs for leader with value val and returns once elected, or
// with ctx.Err() when ctx ends first (the candidacy is then withdrawn:
// nothing stays held or queued). If this candidate leads already it
// returns at once, after proclaiming val if it differs from the value
// leading now (as etcd does); if that Proclaim fails, the term is resigned
// and its error returned. A Campaign while another of this candidate's is
// under way waits for it, then does as above.
func (e *Election) Campaign(ctx context.Context, val string) error {
	st := e.state
	for {
		st.mu.Lock()
		if term := st.leadingLocked(); term != nil {
			st.mu.Unlock()
			if term.Value() == val {
				return nil
			}
			if err := e.Proclaim(ctx, val); err != nil {
				e.Resign(context.WithoutCancel(ctx))
				return err
			}
			return nil
		}
		if wait := st.campaign; wait != nil {
			st.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		done := make(chan struct{})
		st.campaign = done
		st.mu.Unlock()
		term, err := e.c.Campaign(ctx, e.name, val, e.opts...)
		st.mu.Lock()
		st.term, st.campaign = term, nil
		close(done)
		st.mu.Unlock()
		return err
	}
}

// Proclaim changes the leader's value without another election. It
// returns an error matching ErrNotLeader if this candidate does not lead
// (wrapping the *LostError, if its term was lost).
func (e *Election) Proclaim(ctx context.Context, val string) error {
	st := e.state
	st.mu.Lock()
	term := st.term
	st.mu.Unlock()
	if term == nil {
		return ErrNotLeader
	}
	err := term.Proclaim(ctx, val)
	if err != nil && (errors.Is(err, ErrNotHeld) || errors.Is(err, ErrLost)) {
		st.forget(term)
		return fmt.Errorf("%w: %w", ErrNotLeader, err)
	}
	return err
}

// forget drops term, if it is still the one held.
func (st *candidacy) forget(term *Lock) {
	st.mu.Lock()
	if st.term == term {
		st.term = nil
	}
	st.mu.Unlock()
}

// Resign ends this candidate's term, so that the next candidate is
// elected. It returns nil if this candidate does not lead (so a deferred
// Resign after an explicit one is fine), and nil if the term was lost
// meanwhile (it has ended all the same). It returns an error only if the
// agent did not answer (see Lock.Unlock): the candidate then still counts
// as leading, and Resign may be called again.
func (e *Election) Resign(ctx context.Context) error {
	st := e.state
	st.mu.Lock()
	term := st.term
	st.mu.Unlock()
	if term == nil {
		return nil
	}
	err := term.Unlock(ctx)
	if err != nil && !errors.Is(err, ErrNotHeld) && !errors.Is(err, ErrLost) {
		return err
	}
	st.forget(term)
	return nil
}

// Leader returns who leads the election now, as the agent reads it from
// the masters after the call began (see Client.Leader); ErrNoLeader if
// nobody does.
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	l, err := e.c.Leader(ctx, e.name)
	if err != nil {
		return Leader{}, err
	}
	if l.None {
		return Leader{}, ErrNoLeader
	}
	return l, nil
}

// Observe returns a channel that receives the leader, as read after the
// call began, then every new leader and every new value of a leader, in
// order (terms never go back). As etcd's, it receives no "nobody leads":
// while nobody does it waits for the next leader (Client.Observe reports
// those, as Leader.None). It is closed when ctx ends or the connection
// closes, or at once if the agent refuses the observation.
func (e *Election) Observe(ctx context.Context) <-chan Leader {
	out := make(chan Leader)
	ch, err := e.c.Observe(ctx, e.name)
	if err != nil {
		close(out)
		return out
	}
	go func() {
		defer close(out)
		for l := range ch {
			if l.None {
				continue
			}
			select {
			case out <- l:
			case <-ctx.Done():
				for range ch {
				}
				return
			}
		}
	}()
	return out
}

// Rev returns this candidate's term (the fence of its hold) while it
// leads, else 0: pass it, as etcd's users pass the leader key's revision,
// to what the leader writes to, which refuses a lower one.
func (e *Election) Rev() int64 {
	st := e.state
	st.mu.Lock()
	defer st.mu.Unlock()
	if term := st.leadingLocked(); term != nil {
		return term.Fence()
	}
	return 0
}

// Lock returns the hold of this candidate's term while it leads, else nil:
// its Done and Context end with the term.
func (e *Election) Lock() *Lock {
	st := e.state
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.leadingLocked()
}

// Name returns the election's name.
func (e *Election) Name() string { return e.name }
