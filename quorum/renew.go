package quorum

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// RenewKey names one hold to renew, with what to re-create where it is missing.
type RenewKey struct {
	Name, Holder string
	// Entry marks a queue entry's heartbeat: Holder is then the entry's
	// Member, and Record is zero.
	Entry  bool
	Record Record        // the Grant's; a zero Record is never re-created
	Lease  time.Duration // the lease to set; 0: Renew's lease
}

// RenewResult counts the voting masters that renewed a hold (OK), that
// answered it is no longer there (Gone), and, of those, where a renewal
// that kept a majority re-created it (Repaired).
type RenewResult struct {
	OK, Gone, Repaired int
}

// Downgrade makes holder's exclusive hold of name shared on a majority, and
// wakes the name's waiters anywhere. Until it succeeds the hold stays
// exclusive: more than it needs, never less.
func (c *Cluster) Downgrade(ctx context.Context, name, holder string) error {
	r, never := c.vote(ctx, roundSpec{op: OpDowngrade, script: downgradeScript, keys: []string{c.holderKey(name, holder)}, args: []string{c.channel(name), name},
		judge: func(a answer) (int, bool, error) {
			v, err := a.res.AsInt64()
			return 0, err == nil && v == 1, err
		}})
	switch {
	case never != nil:
		return never.Err()
	case r.yes() < c.quorum:
		return c.noQuorumErr(r)
	}
	return nil
}

// renewArgs are the renew script's keys and arguments for holds, each with
// its own lease (lease where it has none).
func (c *Cluster) renewArgs(lease time.Duration, holds []RenewKey) (keys, args []string) {
	keys = make([]string, 0, 1+2*len(holds))
	keys = append(keys, c.markerKey())
	args = make([]string, 0, 2+2*len(holds))
	args = append(args, c.gateArgs()...)
	for _, h := range holds {
		l := h.Lease
		if l <= 0 {
			l = lease
		}
		if h.Entry {
			keys = append(keys, c.queueKey(h.Name), c.deadlinesKey(h.Name))
			args = append(args, h.Holder, "q"+strconv.FormatInt(l.Milliseconds(), 10))
			continue
		}
		keys = append(keys, c.setKey(h.Name), c.holderKey(h.Name, h.Holder))
		args = append(args, h.Holder, strconv.FormatInt(l.Milliseconds(), 10))
	}
	return keys, args
}

// renewReply reads master i's answer to a renew script call: one 1 (renewed)
// or 0 (gone) per hold.
func (c *Cluster) renewReply(i int, res rueidis.RedisResult, n int) ([]int64, error) {
	vals, err := res.AsIntSlice()
	switch {
	case err != nil:
		return nil, err
	case c.quarantineLeft(i, vals) != nil:
		return nil, ErrQuarantined
	case len(vals) != n+1 || vals[0] != 0:
		return nil, errors.New("unexpected renew reply")
	}
	return vals[1:], nil
}

// Extend sets holder's lease on name to lease on a majority and returns the
// new validity deadline. It fails with ErrNotHeld when a majority no longer
// has the hold, else with ErrNoQuorum.
func (c *Cluster) Extend(ctx context.Context, name, holder string, lease time.Duration) (time.Time, error) {
	keys, args := c.renewArgs(lease, []RenewKey{{Name: name, Holder: holder}})
	gone := 0
	r, never := c.vote(ctx, roundSpec{op: OpExtend, script: renewScript, keys: keys, args: args,
		judge: func(a answer) (int, bool, error) {
			vals, err := c.renewReply(a.i, a.res, 1)
			if err == nil && vals[0] == 0 {
				gone++
			}
			return 0, err == nil && vals[0] == 1, err
		}})
	if never != nil {
		return time.Time{}, never.Err()
	}
	n := len(c.masters)
	if Decide(n, r.yes(), gone+r.failed) == Won && Validity(lease, c.clock.Now().Sub(r.start), c.cfg.DriftFactor) > 0 {
		return r.start.Add(Validity(lease, 0, c.cfg.DriftFactor)), nil
	}
	if gone > n-c.quorum {
		return time.Time{}, ErrNotHeld
	}
	return time.Time{}, c.noQuorumErr(r)
}

// renewBatch is how many holds one renew script call carries, and
// renewChunk how many such calls go to a master at once: a chunk at a time,
// so that a large renewal does not fill the connection's buffers at once.
const (
	renewBatch = 256
	renewChunk = 16
)

// Renew sets the lease of every hold in keys on every voting master, in
// pipelined chunks of script calls of renewBatch holds each, and counts the
// answers per hold. Then it repairs: a hold that a majority renewed but
// some voting master lacks (that master was down at the grant, or let the
// key expire while paused) is re-created there, so that it regains its
// full redundancy before the next fault.
func (c *Cluster) Renew(ctx context.Context, lease time.Duration, keys []RenewKey) []RenewResult {
	out := make([]RenewResult, len(keys))
	if len(keys) == 0 {
		return out
	}
	var calls []call
	for lo := 0; lo < len(keys); lo += renewBatch {
		k, a := c.renewArgs(lease, keys[lo:min(lo+renewBatch, len(keys))])
		calls = append(calls, call{keys: k, args: a})
	}
	to, _ := c.voters()
	gone := make([][]int, len(c.masters)) // per master, the holds it lacks
	// A round may take up to a quarter lease: validity counts from before
	// it began, so a slow round is safe, and cutting a busy master's
	// renewal short would lose holds that it was about to keep.
	roundCtx, cancelRound := context.WithTimeout(ctx, max(c.cfg.MasterTimeout, lease/4))
	defer cancelRound()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, i := range to {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for first := 0; first < len(calls) && roundCtx.Err() == nil; first += renewChunk {
				chunk := calls[first:min(first+renewChunk, len(calls))]
				lo := first * renewBatch
				start := time.Now() // latency, not lease logic: see timedEval
				res := c.masters[i].evalMulti(roundCtx, renewScript, chunk)
				c.cfg.Observer.MasterOp(i, OpRenew, time.Since(start))
				mu.Lock()
				for b, r := range res {
					at := lo + b*renewBatch
					vals, err := c.renewReply(i, r, min(renewBatch, len(keys)-at))
					if err != nil {
						continue
					}
					for j, v := range vals {
						if v == 1 {
							out[at+j].OK++
						} else {
							out[at+j].Gone++
							gone[i] = append(gone[i], at+j)
						}
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	c.repair(ctx, lease, keys, out, gone)
	return out
}

// repair re-creates, on each master, the holds of gone that a majority renewed.
func (c *Cluster) repair(ctx context.Context, lease time.Duration, keys []RenewKey, out []RenewResult, gone [][]int) {
	ms := strconv.FormatInt(lease.Milliseconds(), 10)
	opCtx, cancel := context.WithTimeout(ctx, c.cfg.MasterTimeout)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i, holds := range gone {
		var idx []int
		var calls []call
		for _, h := range holds {
			k := keys[h]
			if out[h].OK < c.quorum || k.Record.Fence == 0 {
				continue
			}
			idx = append(idx, h)
			ms := ms
			if k.Lease > 0 {
				ms = strconv.FormatInt(k.Lease.Milliseconds(), 10)
			}
			args := append([]string{k.Holder, ms, c.holderPrefix(k.Name)}, c.gateArgs()...)
			calls = append(calls, call{
				keys: []string{c.setKey(k.Name), c.fenceKey(k.Name), c.holderKey(k.Name, k.Holder), c.markerKey()},
				args: append(append(args, k.Record.fields()...), strconv.FormatInt(max(k.Record.Top, k.Record.Fence), 10)),
			})
		}
		if len(calls) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := c.masters[i].evalMulti(opCtx, repairScript, calls)
			mu.Lock()
			defer mu.Unlock()
			for j, r := range res {
				if v, err := r.AsInt64(); err == nil && v == 2 {
					out[idx[j]].Repaired++
				}
			}
		}()
	}
	wg.Wait()
	for i, r := range out {
		if r.Repaired > 0 {
			c.cfg.Logger.Debug("hold re-created on masters that lacked it", "name", keys[i].Name, "masters", r.Repaired)
		}
	}
}
