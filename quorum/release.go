package quorum

import (
	"context"
	"strconv"
	"sync"
	"time"
)

// releaseOn gives back, on master i alone, a grant of a slot that lost.
func (c *Cluster) releaseOn(name, holder string, i int) {
	keys, args := c.releaseArgs(name, holder, c.giveBack)
	c.goBackground(func() {
		ctx, cancel := context.WithTimeout(context.Background(), max(20*c.cfg.MasterTimeout, time.Second))
		defer cancel()
		c.masters[i].eval(ctx, releaseScript, keys, args)
	})
}

// releaseArgs are the release script's keys and arguments; message is the
// release message: the name for a release, c.giveBack or c.handover.
func (c *Cluster) releaseArgs(name, holder, message string) (keys, args []string) {
	return []string{c.setKey(name), c.holderKey(name, holder)},
		[]string{holder, c.channel(name), message, strconv.FormatInt(c.cfg.Tombstone.Milliseconds(), 10)}
}

// releaseAsync gives back a failed round's partial grants in the background.
// Its release message wakes other agents' waiters (the round's grants may
// have landed late on every master and look like a holder to them) but not
// this agent's own, which would only fail again at once. If the release
// lands before an acquire still on its way (waiting for a batch, say), its
// tombstone makes that acquire refuse.
func (c *Cluster) releaseAsync(name, holder string) {
	c.goBackground(func() { c.release(context.Background(), name, holder, c.giveBack) })
}

// Release drops holder's hold of name on every connected master and wakes
// waiters anywhere. A release must not be dropped: a key left behind blocks
// the name for a whole lease. So each master's release has a long deadline
// and goes on in the background past the return, and it goes to masters
// marked down too, to land when they answer again. The caller waits only
// until a majority answered (or every master it sent to), at most
// min(2×MasterTimeout, 1s): a hung master costs a release nothing. It
// returns how many of the masters that answered held it; errors only when
// none answered.
func (c *Cluster) Release(ctx context.Context, name, holder string) (int, error) {
	return c.release(ctx, name, holder, name)
}

// HandOver is Release by an agent that held name for a run of its local
// holders while another agent waited (see Wanted), and now stands back:
// its message wakes other agents' waiters as a recheck (Watch.Recheck), so
// that an attempt that fails says nothing about contention and costs no
// back-off, and this agent's own waiters not at all.
func (c *Cluster) HandOver(ctx context.Context, name, holder string) (int, error) {
	return c.release(ctx, name, holder, c.handover)
}

func (c *Cluster) release(ctx context.Context, name, holder, message string) (int, error) {
	keys, args := c.releaseArgs(name, holder, message)
	held := 0
	r, _ := c.vote(ctx, roundSpec{op: OpRelease, script: releaseScript, keys: keys, args: args, land: true,
		judge: func(a answer) (int, bool, error) {
			v, err := a.res.AsInt64()
			held += int(v)
			return 0, err == nil, err
		}})
	if r.yes() == 0 {
		return 0, &RoundError{Kind: ErrNoQuorum, Needed: c.quorum, Masters: r.errs}
	}
	return held, nil
}

// everywhere runs a script that must not be dropped (a write-back, a
// removal) as a round that lands (see roundSpec.land), as Release does,
// and returns how many masters answered without error in time.
func (c *Cluster) everywhere(ctx context.Context, op Op, s *script, keys, args []string) int {
	r, _ := c.vote(ctx, roundSpec{op: op, script: s, keys: keys, args: args, land: true})
	return r.yes()
}

// releaseChunk is how many releases ReleaseMany pipelines to a master at once.
const releaseChunk = 1024

// ReleaseMany releases many holds at once, as a closing session or a
// stopping agent does: on every connected master (down ones too: see
// Release), in pipelined chunks on the bulk connection, with no goroutine
// per hold. It returns when every master answered or its deadline passed
// (max(20×MasterTimeout, 1s), plus 10µs per hold); a release that did not
// land leaves its lease to expire.
func (c *Cluster) ReleaseMany(ctx context.Context, holds []RenewKey) {
	if len(holds) == 0 {
		return
	}
	calls := make([]call, len(holds))
	for i, h := range holds {
		keys, args := c.releaseArgs(h.Name, h.Holder, h.Name)
		calls[i] = call{keys: keys, args: args}
	}
	opCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx),
		max(20*c.cfg.MasterTimeout, time.Second)+time.Duration(len(holds))*10*time.Microsecond)
	defer cancel()
	var wg sync.WaitGroup
	for _, m := range c.masters {
		if m.conn(laneBulk) == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for lo := 0; lo < len(calls) && opCtx.Err() == nil; lo += releaseChunk {
				m.evalMulti(opCtx, releaseScript, calls[lo:min(lo+releaseChunk, len(calls))])
			}
		}()
	}
	wg.Wait()
}
