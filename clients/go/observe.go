package lockagent

import (
	"context"
	"sync"
	"time"
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
// Observe of it on the Client.
type observation struct {
	ready     chan struct{} // closed once the OBSERVE is answered
	err       error         // its error, set before ready closes
	observers map[*observer]bool
	last      *Leader // the latest push, for an Observe that joins later
}

// observer is one Observe call's channel, fed from a queue so that the
// reader never waits for a slow consumer, and no change is dropped.
type observer struct {
	out    chan Leader
	mu     sync.Mutex
	queue  []Leader
	signal chan struct{}
	// wantsNext: the next push goes to this observer even if it repeats
	// the last one (the answer to a Leader's own OBSERVE). Under the
	// Client's mu.
	wantsNext bool
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
// only to an observer that asked for it.
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
		if !repeat || o.wantsNext {
			o.enqueue(l)
		}
		o.wantsNext = false
	}
}

// Observe watches who leads name: the channel receives the current Leader
// at once, then every change of leader or of its value (Leader.None while
// there is none), in order; terms never go back. It is closed when ctx ends
// (the agent is then told to stop: UNOBSERVE) or the connection closes.
// Read it until it closes: nothing is dropped for a slow reader. Observers
// of one name on one Client share one OBSERVE.
func (c *Client) Observe(ctx context.Context, name string) (<-chan Leader, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	o := newObserver()
	if err := c.join(ctx, name, o, false); err != nil {
		return nil, err
	}
	go c.forward(ctx, name, o)
	return o.out, nil
}

// join adds o to the observers of name and waits until the agent has
// answered the name's OBSERVE. The first observer sends it. A later one
// starts from the latest push, unless fresh: then it sends its own OBSERVE,
// whose push it gets.
func (c *Client) join(ctx context.Context, name string, o *observer, fresh bool) error {
	obs, again, err := c.add(name, o, fresh)
	if err == nil && again != nil {
		_, err = c.wait(ctx, again)
	}
	if err == nil {
		select {
		case <-obs.ready:
			err = obs.err
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	if err != nil {
		c.leave(name, o)
	}
	return err
}

// add adds o to the observers of name, sending OBSERVE if it is the first
// (the OBSERVE's answer closes the observation's ready), or if fresh
// (that call is returned).
func (c *Client) add(name string, o *observer, fresh bool) (*observation, *call, error) {
	c.obsMu.Lock()
	defer c.obsMu.Unlock()
	c.mu.Lock()
	obs := c.observed[name]
	if obs != nil {
		obs.observers[o] = true
		if obs.last != nil && !fresh {
			o.enqueue(*obs.last)
		}
		c.mu.Unlock()
		if !fresh {
			return obs, nil, nil
		}
		_, cl, err := c.sendThen("OBSERVE "+name, func(r reply) {
			c.mu.Lock()
			o.wantsNext = r.kind == "OK"
			c.mu.Unlock()
		})
		return obs, cl, err
	}
	obs = &observation{ready: make(chan struct{}), observers: map[*observer]bool{o: true}}
	c.observed[name] = obs
	c.mu.Unlock()
	_, cl, err := c.send("OBSERVE " + name)
	if err != nil {
		c.mu.Lock()
		delete(c.observed, name)
		c.mu.Unlock()
		return nil, nil, err
	}
	go func() {
		_, obs.err = c.wait(context.Background(), cl)
		close(obs.ready)
	}()
	return obs, nil, nil
}

// leave removes o from the observers of name; the last one out sends
// UNOBSERVE (not waiting for its answer), unless the OBSERVE failed.
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
	c.mu.Unlock()
	if last {
		go func() {
			<-obs.ready
			if obs.err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				c.do(ctx, "UNOBSERVE "+name)
			}
		}()
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

// Leader returns who leads name now: what the agent pushes in answer to an
// OBSERVE of it (an Observe of the name on this Client shares the OBSERVE,
// but Leader asks again rather than answer from what was pushed last: a
// change may be on its way).
func (c *Client) Leader(ctx context.Context, name string) (Leader, error) {
	if err := checkName(name); err != nil {
		return Leader{}, err
	}
	o := newObserver()
	if err := c.join(ctx, name, o, true); err != nil {
		return Leader{}, err
	}
	defer c.leave(name, o)
	return o.next(ctx, c.closed)
}
