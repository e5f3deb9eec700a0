package quorum

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/lock-agent/lock-agent/quorum/scripts"
	"github.com/redis/rueidis"
)

// Batches. A round sends a script to every master; many rounds at once
// (many clients on many names, a burst) would each cost a master a script
// call, and the agent a command, a goroutine and mostly a write per master.
// So the hot scripts (acquire, release) go through a batcher per master: a
// round's call is made at once, alone, while the master has fewer than
// batchSenders calls of that script in flight, and otherwise waits for one
// to come back and goes with every item that waited meanwhile, in one call
// of the batch script (see scripts/lua/batch.lua). One round alone pays for none of it.
//
// Batching changes no outcome: a batch runs its items in order, each as its
// own call would, and an item's reply is its own. Items of one round's
// masters still travel independently, and the rounds' order on a master
// was never relied on (see scripts/lua/release.lua: tombstones make a release that
// overtakes its acquire win).

const (
	// batchSenders is how many calls of one script a master has in
	// flight before rounds wait for a batch: enough that one slow answer
	// (the third master's, which a round no longer waits for) does not
	// make the next serial round wait, and that the master stays busy
	// while a batch's reply travels.
	batchSenders = 4
	// batchMax bounds the items of one call, and so how long one script
	// keeps the master from everything else.
	batchMax = 64
	// batchQueueMax bounds the items waiting for one master, which grow
	// while it hangs (a hung master is answered 64 items per call per
	// deadline). Beyond it an item fails at once, as a master that does not
	// answer: an acquire is a lost vote; a release leaves the hold to
	// expire with its lease there, as any release that cannot reach a
	// master does.
	batchQueueMax = 1 << 16
)

// batchItem is one round's script call on one master, waiting for a batch.
type batchItem struct {
	keys, args []string
	deadline   time.Time                 // when its caller stops waiting
	timeout    time.Duration             // how long it had when it was queued
	done       func(rueidis.RedisResult) // called once, by a sender; nil once called
}

// batcher gathers a master's items of one script into batches.
type batcher struct {
	m    *master
	many *scripts.Script // the batch variant of the script
	// land is set for a script whose calls must land however late (a
	// release: see Release). Its items are sent however long they waited,
	// each with its whole timeout from then, as a call of its own written
	// to a hung master lands when the master answers again; one past its
	// deadline is answered then, as that call would be, so that callers do
	// not pile up behind a hung master.
	land bool
	mu   sync.Mutex
	// queue holds the items waiting for a sender; inflight counts the
	// calls of the script in flight (alone or batches). The first answered
	// items of the queue were answered at their deadline already (see
	// expireLocked): they wait only to be sent, for a batcher that lands.
	queue    []*batchItem
	answered int
	inflight int
}

// wait queues it if the master has batchSenders calls of the script in
// flight already: a sender then answers it (or wait itself, at once, if
// batchQueueMax items wait already). Else it counts a call that the caller
// makes at once, alone, and must end with done.
func (b *batcher) wait(it *batchItem) (answered bool) {
	b.mu.Lock()
	switch {
	case b.inflight < batchSenders:
		b.inflight++
		b.mu.Unlock()
		return false
	case len(b.queue) >= batchQueueMax:
		b.mu.Unlock()
		it.done(rueidis.NewErrorResult(ErrOverloaded))
		return true
	}
	b.queue = append(b.queue, it)
	expired := b.expireLocked(time.Now())
	b.mu.Unlock()
	for _, done := range expired {
		done(rueidis.NewErrorResult(context.DeadlineExceeded))
	}
	return true
}

// expireLocked takes the callbacks of the items at the front of the queue
// whose deadline passed, for the caller to answer once b.mu is let go: a
// caller behind a hung master hears about when its deadline passes (the
// next call queued after it looks), not only when a sender reaches its
// item. Such an item leaves the queue, unless the batcher lands its items
// (it is then sent all the same). Items come in deadline order, but for
// rounds of other timeouts: one of those is answered when a sender
// reaches it. b.mu is held.
func (b *batcher) expireLocked(now time.Time) []func(rueidis.RedisResult) {
	var expired []func(rueidis.RedisResult)
	for b.answered < len(b.queue) && !now.Before(b.queue[b.answered].deadline) {
		it := b.queue[b.answered]
		expired = append(expired, it.done)
		it.done = nil
		b.answered++
	}
	if !b.land && b.answered > 0 {
		rest := copy(b.queue, b.queue[b.answered:])
		clear(b.queue[rest:])
		b.queue = b.queue[:rest]
		b.answered = 0
	}
	return expired
}

// done ends a call the caller made alone: its goroutine then sends, as
// batches, the items that waited meanwhile, until none is left.
func (b *batcher) done() {
	for {
		b.mu.Lock()
		n := min(len(b.queue), batchMax)
		if n == 0 {
			b.inflight--
			b.mu.Unlock()
			return
		}
		batch := make([]*batchItem, n)
		copy(batch, b.queue)
		rest := copy(b.queue, b.queue[n:])
		clear(b.queue[rest:])
		b.queue = b.queue[:rest]
		b.answered = max(b.answered-n, 0)
		b.mu.Unlock()
		b.run(batch)
	}
}

// errBatchReply is a batch reply that does not answer every item.
var errBatchReply = errors.New("batch reply has the wrong number of items")

// run sends one batch and hands each item its reply. An item whose
// caller gave up meanwhile is not sent (it could only be undone), unless
// the batcher's items must land.
func (b *batcher) run(batch []*batchItem) {
	now := time.Now()
	live := batch[:0]
	var deadline time.Time
	for _, it := range batch {
		itemDeadline := it.deadline
		if !now.Before(itemDeadline) {
			if it.done != nil { // not answered in the queue already (see expireLocked)
				it.done(rueidis.NewErrorResult(context.DeadlineExceeded))
				it.done = nil
			}
			if !b.land {
				continue
			}
		}
		if b.land {
			itemDeadline = now.Add(it.timeout)
		}
		live = append(live, it)
		if itemDeadline.After(deadline) {
			deadline = itemDeadline
		}
	}
	if len(live) == 0 {
		return
	}
	keys := make([]string, 0, len(live)*len(live[0].keys))
	args := make([]string, 0, len(live)*len(live[0].args))
	for _, it := range live {
		keys = append(keys, it.keys...)
		args = append(args, it.args...)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	vals, err := b.m.evalOn(ctx, laneRounds, b.many, keys, args).ToArray()
	cancel()
	if err == nil && len(vals) != len(live) {
		err = errBatchReply
	}
	for i, it := range live {
		switch {
		case it.done == nil: // answered at its deadline
		case err != nil:
			it.done(rueidis.NewErrorResult(err))
		default:
			it.done(rueidis.NewResult(vals[i], nil))
		}
	}
}
