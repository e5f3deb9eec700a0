package lockagent

import (
	"context"
	"sync"
)

// Leader is who leads a name, as an observer sees it: the holder elected by
// Campaign (the name's exclusive holder), its term and its value.
type Leader struct {
	Name string `json:"name"`
	// None is true while nobody leads the name; the other fields are then zero.
	None bool `json:"none"`
	// Fence is the leader's term: strictly increasing per name.
	Fence int64 `json:"fence"`
	// Value is the leader's value, decoded ("" if none).
	Value string `json:"value"`
	// Agent is the agent.id of the leader's agent.
	Agent string `json:"agent"`
}

// leaderOf reads a * LEADER push's words after the name.
func leaderOf(name string, words []string, fields map[string]string) Leader {
	if len(words) > 0 && words[0] == "none" {
		return Leader{Name: name, None: true}
	}
	return Leader{Name: name, Fence: atoi64(fields["fence"]), Value: decodeValue(fields["value"]), Agent: fields["agent"]}
}

// observation is this connection's OBSERVE of one name, shared by every
// Observe and Leader of it on the Client. Each call sends an OBSERVE of its
// own (the agent answers each with the leader read after it arrived), so
// none starts from what was pushed before it was called.
type observation struct {
	observers map[*observer]bool
	last      *Leader // the latest push, to tell a change from a repeat
	// observing: an OBSERVE of it was answered OK or is unanswered, so the
	// last observer out must send UNOBSERVE (not after refusals only).
	observing bool
}

// observer is one Observe or Leader call's channel, fed from a queue so
// that the reader never waits for a slow consumer, and no change is
// dropped.
type observer struct {
	out    chan Leader
	mu     sync.Mutex
	queue  []Leader
	signal chan struct{}
	// Under the Client's mu: answered is set once the call's OBSERVE was
	// answered (before that, pushes are not for it: they may predate the
	// call); ok if it was answered OK; wantsNext then makes the next push
	// go to it even if it repeats the last one (the agent answers each
	// OBSERVE with a push).
	answered, ok, wantsNext bool
}

// othersObserving says whether an observer of obs other than o was
// answered OK or awaits its answer. Under the Client's mu.
func (o *observer) othersObserving(obs *observation) bool {
	for other := range obs.observers {
		if other != o && (!other.answered || other.ok) {
			return true
		}
	}
	return false
}

func newObserver() *observer {
	return &observer{out: make(chan Leader), signal: make(chan struct{}, 1)}
}

// next takes the first Leader of o's queue, waiting until there is one, ctx
// ends or the connection closes.
func (o *observer) next(ctx context.Context, closed <-chan struct{}) (Leader, error) {
	for {
		o.mu.Lock()
		if len(o.queue) > 0 {
			l := o.queue[0]
			o.queue = o.queue[1:]
			o.mu.Unlock()
			return l, nil
		}
		o.mu.Unlock()
		select {
		case <-o.signal:
		case <-ctx.Done():
			return Leader{}, ctx.Err()
		case <-closed:
			return Leader{}, ErrClosed
		}
	}
}

func (o *observer) enqueue(l Leader) {
	o.mu.Lock()
	o.queue = append(o.queue, l)
	o.mu.Unlock()
	select {
	case o.signal <- struct{}{}:
	default:
	}
}

// leader hands a * LEADER push to the name's observers. A push that repeats
// the last (the agent answers each OBSERVE with the current state) goes
// only to an observer that asked for it; none goes to an observer whose
// OBSERVE is not answered yet.
func (c *Client) leader(l Leader) {
	c.mu.Lock()
	defer c.mu.Unlock()
	obs := c.observed[l.Name]
	if obs == nil {
		return
	}
	repeat := obs.last != nil && *obs.last == l
	obs.last = &l
	for o := range obs.observers {
		if !o.answered {
			continue
		}
		if !repeat || o.wantsNext {
			o.enqueue(l)
		}
		o.wantsNext = false
	}
}

// Observe watches who leads name: the channel receives the Leader as the
// agent read it after this call began, then every change of leader or of
// its value (Leader.None while there is none), in order; terms never go
// back. It is closed when ctx ends (the agent is then told to stop:
// UNOBSERVE) or the connection closes. Read it until it closes: nothing is
// dropped for a slow reader. Observers of one name on one Client share one
// observation at the agent.
func (c *Client) Observe(ctx context.Context, name string) (<-chan Leader, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	o := newObserver()
	if err := c.join(ctx, name, o); err != nil {
		return nil, err
	}
	go c.forward(ctx, name, o)
	return o.out, nil
}

// join adds o to the observers of name, sends its OBSERVE, and waits for
// the answer; o gets the push that follows it, and every change after.
// OBSERVE and UNOBSERVE lines go out under obsMu, in the order of the
// changes of observed they stand for, so that an UNOBSERVE of an earlier
// call never ends a later call's observation.
func (c *Client) join(ctx context.Context, name string, o *observer) error {
	c.obsMu.Lock()
	c.mu.Lock()
	obs := c.observed[name]
	if obs == nil {
		obs = &observation{observers: map[*observer]bool{}}
		c.observed[name] = obs
	}
	obs.observers[o] = true
	obs.observing = true // until the answer says otherwise
	c.mu.Unlock()
	_, cl, err := c.sendThen("OBSERVE "+name, func(r reply) {
		c.mu.Lock()
		o.answered, o.ok, o.wantsNext = true, r.kind == "OK", r.kind == "OK"
		if r.kind != "OK" && !o.othersObserving(obs) {
			obs.observing = false
		}
		c.mu.Unlock()
	})
	c.obsMu.Unlock()
	if err == nil {
		_, err = c.wait(ctx, cl)
	}
	if err != nil {
		c.leave(name, o)
	}
	return err
}

// leave removes o from the observers of name; the last one out sends
// UNOBSERVE at once (not waiting for its answer: no push of the name comes
// after it, and a later OBSERVE goes out after it).
func (c *Client) leave(name string, o *observer) {
	c.obsMu.Lock()
	defer c.obsMu.Unlock()
	c.mu.Lock()
	obs := c.observed[name]
	if obs == nil || !obs.observers[o] {
		c.mu.Unlock()
		return
	}
	delete(obs.observers, o)
	last := len(obs.observers) == 0
	if last {
		delete(c.observed, name)
	}
	observing := obs.observing
	c.mu.Unlock()
	if last && observing {
		c.send("UNOBSERVE " + name) // its answer is not waited for
	}
}

// forward feeds o.out from o's queue until ctx ends or the connection
// closes, then closes it.
func (c *Client) forward(ctx context.Context, name string, o *observer) {
	defer close(o.out)
	defer c.leave(name, o)
	for {
		l, err := o.next(ctx, c.closed)
		if err != nil {
			return
		}
		select {
		case o.out <- l:
		case <-ctx.Done():
			return
		case <-c.closed:
			return
		}
	}
}

// Leader returns who leads name now: the first push of an OBSERVE of its
// own, which the agent reads from the masters after the OBSERVE arrived,
// never a term that had ended before (an Observe of the name on this
// Client shares the observation, not the answer).
func (c *Client) Leader(ctx context.Context, name string) (Leader, error) {
	if err := checkName(name); err != nil {
		return Leader{}, err
	}
	o := newObserver()
	if err := c.join(ctx, name, o); err != nil {
		return Leader{}, err
	}
	defer c.leave(name, o)
	return o.next(ctx, c.closed)
}
