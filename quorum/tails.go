package quorum

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lock-agent/lock-agent/quorum/rules"
	"github.com/lock-agent/lock-agent/quorum/scripts"
)

// Tail is what keeps a name unavailable after its hold ended (see
// scripts/lua/tails.lua). The zero Tail is none: such a hold costs nothing more.
type Tail struct {
	// Delay is how long the name stays unavailable to everyone after the
	// hold ends uncleanly (delay=): its agent died, its session closed
	// without UNLOCK, it was lost or revoked.
	Delay time.Duration
	// MinHold is how long after the grant the name stays unavailable,
	// however the hold ends (min_hold=).
	MinHold time.Duration
}

// Any says whether t keeps the name after the hold at all.
func (t Tail) Any() bool { return t.Delay > 0 || t.MinHold > 0 }

func (t Tail) args() []string {
	return []string{strconv.FormatInt(t.Delay.Milliseconds(), 10), strconv.FormatInt(t.MinHold.Milliseconds(), 10)}
}

// End ends holder's hold of name, which has a Tail, on every connected
// master, as Release does one without: the name then stays unavailable
// for what is left of its min_hold, or its delay if clean is false
// (whichever is longer). It says whether a majority keeps a tail.
func (c *Cluster) End(ctx context.Context, name, holder string, clean bool) (bool, error) {
	keys, args := c.releaseArgs(name, holder, name)
	keys = append(keys, c.keys.Marker())
	args = append(args, "0")
	if clean {
		args[len(args)-1] = "1"
	}
	tails := 0
	r, _ := c.vote(ctx, roundSpec{op: OpRelease, script: scripts.End, keys: keys, args: args, land: true,
		judge: func(a answer) (int, bool, error) {
			v, err := a.res.AsInt64()
			if v == 2 {
				tails++
			}
			return 0, err == nil, err
		}})
	if r.yes() == 0 {
		return false, &RoundError{Kind: ErrNoQuorum, Needed: c.quorum, Masters: r.errs}
	}
	return tails >= c.quorum, nil
}

// DelayedUntil returns when the tail of name ends (see scripts/lua/tails.lua) as a
// majority of the voting masters have it, in Unix ms of their clocks, or 0
// while no majority has one; with masters that did not answer, the latest
// end that the answers do not rule out as a majority's (see readQuorum).
func (c *Cluster) DelayedUntil(ctx context.Context, name string) (int64, error) {
	var ends []int64
	r, never := c.vote(ctx, roundSpec{op: OpWho, script: scripts.Delayed, keys: []string{c.keys.Set(name)}, args: []string{c.keys.HolderPrefix(name)}, whole: true,
		judge: func(a answer) (int, bool, error) {
			v, err := a.res.AsInt64()
			if err == nil {
				ends = append(ends, v)
			}
			return 0, err == nil, err
		}})
	if err := c.majorityErr(r, never); err != nil {
		return 0, err
	}
	slices.Sort(ends)
	return ends[len(ends)-rules.ReadQuorum(c.quorum, len(c.masters)-len(ends))], nil // the latest end a majority may have
}

// revokePrefix starts a revocation's message on the revocations channel:
// "revoke HOLDER REASON".
const revokePrefix = "revoke "

// WatchRevocations subscribes to revocations, which Config.OnRevoke hears,
// until the watch is closed.
func (c *Cluster) WatchRevocations(ctx context.Context) *Watch {
	return c.watchChannel(ctx, c.keys.Revocations())
}

// onRevoke hands a revocation's message to Config.OnRevoke.
func (c *Cluster) onRevoke(message string) {
	if holder, reason, ok := parseRevocation(message); ok && c.cfg.OnRevoke != nil {
		c.cfg.OnRevoke(holder, reason)
	}
}

// revocation is the message of the revocation of holder's hold for reason.
func revocation(holder, reason string) string { return revokePrefix + holder + " " + reason }

// parseRevocation reads a revocation's message. The reason is the last
// word and the holder id all before it: quorum does not rule out a space
// in a holder id (the agent's ids have none: agent.id may not).
func parseRevocation(message string) (holder, reason string, ok bool) {
	rest, ok := strings.CutPrefix(message, revokePrefix)
	i := strings.LastIndexByte(rest, ' ')
	if !ok || i <= 0 || i == len(rest)-1 {
		return "", "", false
	}
	return rest[:i], rest[i+1:], true
}

// Revoke revokes the holds of name (those of agent, if not ""): on a
// majority each becomes unrenewable while it still blocks the name (see
// scripts/lua/revoke.lua), its agent is told on the revocations channel, and Revoke
// waits, until ctx ends, for each to be ended on a majority (its agent
// released it, or it expired: a revoked record cannot outlive its lease).
// It returns how many holds a majority revoked. ErrNoQuorum when no
// majority answered; ctx's error when one was not ended in time.
func (c *Cluster) Revoke(ctx context.Context, name, agent, reason string) (int, error) {
	holders, err := c.revokeRound(ctx, name, agent)
	if err != nil || len(holders) == 0 {
		return 0, err
	}
	watch := c.Watch(ctx, name) // the agents' ends publish on it
	defer watch.Close()
	c.eachMaster(ctx, func(ctx context.Context, m *master) {
		for _, h := range holders {
			m.publish(ctx, c.keys.Revocations(), revocation(h, reason))
		}
	})
	for {
		live, err := c.revokedLive(ctx, name, holders)
		if err == nil && live == 0 {
			return len(holders), nil
		}
		t := c.clock.NewTimer(revokePoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return len(holders), ctx.Err()
		case <-watch.C():
		case <-t.C():
		}
		t.Stop()
	}
}

// revokePoll is how often Revoke looks whether revoked holds ended when no
// message says so: a record whose agent does not answer expires silently.
const revokePoll = 100 * time.Millisecond

// revokeRound runs scripts/lua/revoke.lua on the masters and returns the holders that a
// majority revoked.
func (c *Cluster) revokeRound(ctx context.Context, name, agent string) ([]string, error) {
	counts := map[string]int{}
	var order []string
	r, never := c.vote(ctx, roundSpec{op: OpRelease, script: scripts.Revoke, keys: []string{c.keys.Set(name)},
		args: []string{c.keys.HolderPrefix(name), agent, strconv.FormatInt(c.cfg.Tombstone.Milliseconds(), 10)}, whole: true,
		judge: func(a answer) (int, bool, error) {
			vals, err := a.res.AsStrSlice()
			for _, h := range vals {
				if counts[h]++; counts[h] == 1 {
					order = append(order, h)
				}
			}
			return 0, err == nil, err
		}})
	if err := c.majorityErr(r, never); err != nil {
		return nil, err
	}
	return slices.DeleteFunc(order, func(h string) bool { return counts[h] < c.quorum }), nil
}

// revokedLive counts the holders whose revoked record a majority of the
// voting masters do not yet know ended.
func (c *Cluster) revokedLive(ctx context.Context, name string, holders []string) (int, error) {
	keys := make([]string, len(holders))
	for i, h := range holders {
		keys[i] = c.keys.Revoked(name, h)
	}
	ended := make([]int, len(holders))
	r, never := c.vote(ctx, roundSpec{op: OpWho, script: scripts.RevokedLive, keys: keys, whole: true,
		judge: func(a answer) (int, bool, error) {
			vals, err := a.res.AsIntSlice()
			if err == nil && len(vals) != len(holders) {
				err = errors.New("unexpected reply")
			}
			for i, v := range vals {
				if err == nil && v == 0 {
					ended[i]++
				}
			}
			return 0, err == nil, err
		}})
	if err := c.majorityErr(r, never); err != nil {
		return 0, err
	}
	live := 0
	for _, n := range ended {
		if n < c.quorum {
			live++
		}
	}
	return live, nil
}
