package quorum

import (
	"context"
	"errors"
	"strconv"
	"time"
)

// Entry is one waiter's place in a name's queue in the masters: a fair=true
// LOCK that has to wait, or an exclusive one that only shared holders block
// (so that readers arriving after it cannot starve it). A claim with an
// entry may pass no conflicting live entry ahead of it; a claim without one
// may pass none at all (see queueLua).
type Entry struct {
	// ID is unique across agents and waits: the agent's id and a counter.
	// Equal tickets order by it.
	ID    string
	Claim Claim
}

// Member is the entry as the masters store it: the scripts read its claim
// from it.
func (e Entry) Member() string {
	return e.ID + "|" + string(e.Claim.mode()) + "|" + strconv.Itoa(e.Claim.limit())
}

func (c *Cluster) queueKey(name string) string     { return c.setKey(name) + ":q" }
func (c *Cluster) deadlinesKey(name string) string { return c.setKey(name) + ":qd" }
func (c *Cluster) ticketKey(name string) string    { return c.setKey(name) + ":qseq" }
func (c *Cluster) leftPrefix(name string) string   { return c.setKey(name) + ":qx:" }

// Enqueue gives entries (of one agent, in its arrival order) their places
// at the back of name's queue and returns their tickets. It runs two
// rounds: each voting master gives each entry a ticket, then the highest
// ticket a majority gave is written to every master (a settled ticket, like
// a fence), so that all masters order the queue alike, and an entry made
// after Enqueue returned is behind these on any majority. Entries of one
// call keep their order. heartbeat is how long an entry lives on a master
// unless Renew renews it (RenewKey.Entry). A ticket of 0 means the entry had
// left already (see Dequeue). It fails with a *RoundError of ErrNoQuorum
// when either round misses a majority; the entries then may or may not be
// queued on some masters, and their heartbeats lapse unless renewed.
func (c *Cluster) Enqueue(ctx context.Context, name string, entries []Entry, heartbeat time.Duration) ([]int64, error) {
	if c.closed() {
		return nil, ErrClosed
	}
	done, err := c.admit(ctx, c.cfg.AdmitTimeout)
	if err != nil {
		return nil, err
	}
	defer done()
	members := make([]string, len(entries))
	for i, e := range entries {
		members[i] = e.Member()
	}
	ms := strconv.FormatInt(heartbeat.Milliseconds(), 10)
	to, errs := c.voters()
	keys := []string{c.queueKey(name), c.deadlinesKey(name), c.ticketKey(name), c.markerKey()}
	args := append(append(c.gateArgs(), ms, c.leftPrefix(name)), members...)
	answers, cancel, timeout := c.fanout(ctx, OpEnqueue, enqueueScript, keys, args, to)
	tickets := make([]int64, len(entries))
	granted, _, errs, unread := c.collect(answers, len(to), timeout, errs, func(a answer) (int, bool, error) {
		vals, err := a.res.AsIntSlice()
		switch {
		case err != nil:
			return 0, false, err
		case c.quarantineLeft(a.i, vals) != nil:
			return 0, false, ErrQuarantined
		case len(vals) != len(entries)+1 || vals[0] != 0:
			return 0, false, errors.New("unexpected enqueue reply")
		}
		for j, t := range vals[1:] {
			if t == 0 || tickets[j] < 0 {
				tickets[j] = -1 // left: it stays out
				continue
			}
			tickets[j] = max(tickets[j], t)
		}
		return 0, true, nil
	})
	c.drain(answers, unread, cancel, nil)
	if granted[0] < c.quorum {
		return nil, &RoundError{Kind: ErrNoQuorum, Yes: granted[0], Needed: c.quorum, Masters: errs}
	}
	settle := []string{ms, c.leftPrefix(name)}
	for j, t := range tickets {
		if t < 0 {
			tickets[j] = 0
			continue
		}
		settle = append(settle, members[j], strconv.FormatInt(t, 10))
	}
	if len(settle) == 2 {
		return tickets, nil
	}
	if ok := c.everywhere(ctx, OpEnqueue, settleScript, keys[:3], settle, nil); ok < c.quorum {
		return nil, &RoundError{Kind: ErrNoQuorum, Yes: ok, Needed: c.quorum}
	}
	return tickets, nil
}

// Dequeue takes entries out of name's queue on every master and wakes the
// name's waiters anywhere. Like a release it is not dropped: it goes on in
// the background past the return (see everywhere), and an entry whose
// removal did not land leaves once its heartbeat lapses.
func (c *Cluster) Dequeue(ctx context.Context, name string, entries []Entry) {
	if len(entries) == 0 {
		return
	}
	args := []string{c.channel(name), name, c.leftPrefix(name), strconv.FormatInt(c.cfg.Tombstone.Milliseconds(), 10)}
	for _, e := range entries {
		args = append(args, e.Member())
	}
	c.everywhere(ctx, OpDequeue, dequeueScript, []string{c.queueKey(name), c.deadlinesKey(name)}, args, nil)
}

// QueueLen returns how many live entries name's queue has: the most any
// master of an answering majority counts.
func (c *Cluster) QueueLen(ctx context.Context, name string) (int, error) {
	done, err := c.admit(ctx, c.cfg.AdmitTimeout)
	if err != nil {
		return 0, err
	}
	defer done()
	to, errs := c.voters()
	answers, cancel, timeout := c.fanout(ctx, OpWho, queueLenScript, []string{c.deadlinesKey(name)}, nil, to)
	most := 0
	granted, _, errs, unread := c.collect(answers, len(to), timeout, errs, func(a answer) (int, bool, error) {
		n, err := a.res.AsInt64()
		most = max(most, int(n))
		return 0, err == nil, err
	})
	c.drain(answers, unread, cancel, nil)
	if granted[0] < c.quorum {
		return 0, &RoundError{Kind: ErrNoQuorum, Yes: granted[0], Needed: c.quorum, Masters: errs}
	}
	return most, nil
}
