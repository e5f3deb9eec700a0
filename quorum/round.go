package quorum

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/rueidis"
)

// admit waits for a round's turn, at most budget, and returns its release.
func (c *Cluster) admit(ctx context.Context, budget time.Duration) (func(), error) {
	select {
	case c.rounds <- struct{}{}:
		return func() { <-c.rounds }, nil
	default:
	}
	t := time.NewTimer(budget)
	defer t.Stop()
	select {
	case c.rounds <- struct{}{}:
		return func() { <-c.rounds }, nil
	case <-t.C:
		return nil, &RoundError{Kind: ErrNoQuorum, Needed: c.quorum, Masters: []error{ErrOverloaded}}
	case <-ctx.Done():
		return nil, &RoundError{Kind: ErrNoQuorum, Needed: c.quorum, Masters: []error{ctx.Err()}}
	}
}

// answer is one master's reply in a round.
type answer struct {
	i   int
	res rueidis.RedisResult
}

// voters returns the masters that may vote now, and why each other one cannot.
func (c *Cluster) voters() (to []int, skipped []error) {
	for i, m := range c.masters {
		if err := m.voteErr(); err != nil {
			skipped = append(skipped, err)
		} else {
			to = append(to, i)
		}
	}
	return to, skipped
}

// fanout sends one script (of op) to the masters to, and returns where
// their answers come and the round's deadline (see roundTimeout).
func (c *Cluster) fanout(ctx context.Context, op Op, s *script, keys, args []string, to []int) (<-chan answer, context.CancelFunc, time.Duration) {
	timeout := c.roundTimeout(to)
	opCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	answers := make(chan answer, len(to))
	for _, i := range to {
		m := c.masters[i]
		start := time.Now()
		answered := func(r rueidis.RedisResult) {
			if r.Error() == nil || !errors.Is(r.Error(), context.DeadlineExceeded) {
				m.observe(time.Since(start))
			} else {
				m.observe(timeout)
			}
			answers <- answer{i, r}
		}
		go c.call(opCtx, i, op, s, start.Add(timeout), keys, args, answered)
	}
	return answers, cancel, timeout
}

// call runs s on master i and hands answered its reply. The hot scripts'
// calls may wait for a batch instead (see batch.go), so it must be called
// in a goroutine of its own that may end before the reply: answered is
// then called by the goroutine that sends the batch.
func (c *Cluster) call(ctx context.Context, i int, op Op, s *script, deadline time.Time, keys, args []string, answered func(rueidis.RedisResult)) {
	b := c.masters[i].batcherFor(s)
	start := time.Now()
	if b != nil && b.wait(&batchItem{keys: keys, args: args, deadline: deadline, timeout: deadline.Sub(start), done: func(r rueidis.RedisResult) {
		c.cfg.Observer.MasterOp(i, op, time.Since(start))
		answered(r)
	}}) {
		return
	}
	answered(c.timedEval(ctx, op, i, s, keys, args))
	if b != nil {
		b.done()
	}
}

// roundTimeout is a round's deadline: MasterTimeout, or longer while the
// masters' recent answers have been slow (a busy host: the agent's own CPU
// counts in what it measures), up to 10×MasterTimeout. A slow round is
// safe (validity counts from its start); cutting it short on a busy host
// turned healthy masters' answers into NO_QUORUM.
func (c *Cluster) roundTimeout(to []int) time.Duration {
	d := c.cfg.MasterTimeout
	for _, i := range to {
		d = max(d, min(4*c.masters[i].latency(), 10*c.cfg.MasterTimeout))
	}
	return d
}

// timedEval is master i's eval, timed for the Observer. Latency is not
// lease logic: it reads the monotonic clock, not the Cluster's Clock.
func (c *Cluster) timedEval(ctx context.Context, op Op, i int, s *script, keys, args []string) rueidis.RedisResult {
	start := time.Now()
	r := c.masters[i].eval(ctx, s, keys, args)
	c.cfg.Observer.MasterOp(i, op, time.Since(start))
	return r
}

// next returns the next answer, or false once the round's deadline passed.
// Rounds keep their own deadline rather than trust the client library to
// honour the context: a call can block on a reconnect's dial.
func next(answers <-chan answer, deadline *time.Timer) (answer, bool) {
	select {
	case a := <-answers:
		return a, true
	case <-deadline.C:
		// A collector scheduled late (a loaded host) finds the deadline and
		// answers ready at once: answers that came in time count.
		select {
		case a := <-answers:
			deadline.Reset(0)
			return a, true
		default:
			return answer{}, false
		}
	}
}

// collect reads a round's answers until its outcome is certain or
// MasterTimeout passed. judge says which slot an answer granted (0 for a
// lock), or that it refused, or the error of a master that failed. It
// returns the grants per slot, the masters that failed (the skipped ones,
// passed in as errs, included), every failure's error, and how many answers
// were left unread (for drain).
func (c *Cluster) collect(answers <-chan answer, sent int, timeout time.Duration, errs []error, judge func(answer) (slot int, agreed bool, err error)) (granted map[int]int, failed int, _ []error, unread int) {
	n := len(c.masters)
	granted = map[int]int{}
	failed = len(errs)
	refused := 0
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	got := 0
	for ; got < sent; got++ {
		if o, _ := DecideSlots(n, granted, failed+refused); o != Pending {
			break
		}
		a, ok := next(answers, deadline)
		if !ok {
			errs = append(errs, errUnanswered(sent-got))
			failed += sent - got
			break
		}
		slot, agreed, err := judge(a)
		switch {
		case err != nil:
			errs = append(errs, &MasterError{c.masters[a.i].cfg.Name, err})
			failed++
		case agreed:
			granted[slot]++
		default:
			refused++
		}
	}
	return granted, failed, errs, sent - got
}

// errUnanswered stands for the masters that did not answer a round in time.
func errUnanswered(n int) error {
	return &MasterError{fmt.Sprintf("%d master(s)", n), context.DeadlineExceeded}
}

// drain waits for the answers a decided round did not read, hands each to
// late (if not nil), then frees the round.
func (c *Cluster) drain(answers <-chan answer, n int, cancel context.CancelFunc, late func(answer)) {
	if n == 0 {
		cancel()
		return
	}
	c.goBackground(func() {
		for range n {
			a := <-answers
			if late != nil {
				late(a)
			}
		}
		cancel()
	})
}

// quarantineLeft reads a script's {-2, ms} refusal: the master is
// quarantined for ms more. It notes it and returns the error to count.
func (c *Cluster) quarantineLeft(i int, vals []int64) error {
	if len(vals) == 2 && vals[0] == -2 {
		c.masters[i].quarantined(time.Duration(vals[1]) * time.Millisecond)
		return ErrQuarantined
	}
	return nil
}
