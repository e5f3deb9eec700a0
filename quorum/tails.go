package quorum

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Tail is what keeps a name unavailable after its hold ended (see
// tailsLua). The zero Tail is none: such a hold costs nothing more.
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

// tailsLua is how a hold outlives itself on a master: a tail is the
// holder's record kept after the hold ended, blocking every claim until it
// expires. A hold with a Tail is granted with the record's fields
//
//	until      the master's ms at which the hold's own lease ends (each
//	           renewal moves it)
//	delay      the Delay, in ms
//	min_until  the master's ms at grant + MinHold
//
// and PX = max(lease + delay, min_until − now), renewed the same way (a
// renewal never shortens it). A record whose until is past is a tail: the
// hold is over (its agent stopped renewing it: it died, or lost its
// masters) and only its delay or min_hold remains; acquireSrc counts it as
// blocking every claim, with its PTTL as the wait. An end of the hold that
// its agent makes (endSrc) turns the record into a tail at once, with PX
// the delay (an unclean end) or what is left of min_hold, whichever is
// longer. The record is then renamed to HOLDER! (key and set member), as a
// revoked one is (see revokeSrc): the renewal of HOLDER finds nothing,
// so a renewal on its way cannot bring the hold back.
// All times are each master's own clock: skewed agent clocks do not matter.
// Each script that sets a tail's PX also raises the master's tail horizon
// (tail_mark; see horizon.go), so that a master that loses its data sits
// out the tails it forgot.
//
// A record that a renewal's repair re-created on a master that lacked it
// (repairSrc) has no tail fields: its first renewal gives it an until and
// no delay or min_hold, which only that master (a minority) then lacks.
const tailsLua = `
local tail_clock
local function tail_now()
  if not tail_clock then
    local t = redis.call('TIME')
    tail_clock = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return tail_clock
end
local function is_tail(key)
  local u = redis.call('HGET', key, 'until')
  return u and tonumber(u) <= tail_now()
end
local function tail_mark(marker, px)
  local m = redis.call('HMGET', marker, 'epoch', 'tail_until')
  local last = tail_now() + px
  if m[1] and (tonumber(m[2]) or 0) < last then
    redis.call('HSET', marker, 'tail_until', string.format('%d', last))
  end
end
local function tail_grant(marker, key, lease, delay, minh)
  if delay <= 0 and minh <= 0 then return lease end
  local now = tail_now()
  redis.call('HSET', key, 'until', string.format('%d', now + lease), 'delay', string.format('%d', delay),
    'min_until', string.format('%d', now + minh))
  local px = math.max(lease + delay, minh)
  tail_mark(marker, px)
  return px
end
local function tail_renew(marker, set, key, holder, lease, now)
  local h = redis.call('HMGET', key, 'delay', 'min_until', 'until')
  if h[3] and tonumber(h[3]) <= now then return 0 end -- a tail: the hold is over here
  if not h[3] and redis.call('EXISTS', key) == 0 then return 0 end
  local px = math.max(lease + (tonumber(h[1]) or 0), (tonumber(h[2]) or 0) - now)
  redis.call('HSET', key, 'until', string.format('%d', now + lease))
  redis.call('PEXPIRE', key, px)
  redis.call('SADD', set, holder)
  if redis.call('PTTL', set) < px then redis.call('PEXPIRE', set, px) end
  tail_mark(marker, px)
  return 1
end
`

// endSrc ends a hold that has a Tail (see tailsLua), as releaseSrc ends
// one that has none: the record (or its revoked form) becomes a tail for
// what is left of min_hold, or for its delay if the end is unclean
// (ARGV[5] "0"), whichever is longer; with nothing left it is dropped.
// Either way the name's waiters anywhere are woken: they read the tail's
// end. It leaves a tombstone as releaseSrc does. A tail already there is
// left as it is.
// KEYS: set, holder key, marker. ARGV: holder, channel, message, tombstone ms,
// clean (1 or 0). Returns 2 if a tail is now kept, 1 if the record was
// dropped, 0 if there was none.
const endSrc = tailsLua + `
redis.call('SET', KEYS[1] .. ':released:' .. ARGV[1], '1', 'PX', ARGV[4])
local key, ended = KEYS[2], KEYS[2] .. '!'
if redis.call('EXISTS', key) == 0 then
  key = ended
  if redis.call('EXISTS', key) == 0 then
    redis.call('SREM', KEYS[1], ARGV[1], ARGV[1] .. '!')
    return 0
  end
  if is_tail(key) then return 2 end
end
local h = redis.call('HMGET', key, 'delay', 'min_until')
local now = tail_now()
local px = (tonumber(h[2]) or 0) - now
if ARGV[5] ~= '1' then px = math.max(px, tonumber(h[1]) or 0) end
if px <= 0 then
  redis.call('DEL', key)
  redis.call('SREM', KEYS[1], ARGV[1], ARGV[1] .. '!')
else
  if key ~= ended then redis.call('RENAME', key, ended) end
  redis.call('SREM', KEYS[1], ARGV[1])
  redis.call('SADD', KEYS[1], ARGV[1] .. '!')
  redis.call('HSET', ended, 'until', string.format('%d', now))
  redis.call('PEXPIRE', ended, px)
  if redis.call('PTTL', KEYS[1]) < px then redis.call('PEXPIRE', KEYS[1], px) end
  tail_mark(KEYS[3], px)
end
redis.call('PUBLISH', ARGV[2], ARGV[3])
if px <= 0 then return 1 end
return 2
`

// revokeSrc revokes the live holds of a name (those of one agent, if
// ARGV[2] is not ""): each record is renamed to HOLDER! with its PTTL, and
// its set member with it. The revoked record still blocks what the hold
// blocked, until its agent ends it (endSrc or releaseSrc, after telling
// its client) or it expires; but nothing can renew it (the renewal of
// HOLDER finds no record: the hold is lost on this master) or re-create it
// (a tombstone, as a release leaves). A tail is not a hold: it is left.
// KEYS: set. ARGV: holder key prefix, agent ("" for any), tombstone ms.
// Returns the holders revoked.
const revokeSrc = tailsLua + `
local out = {}
for _, m in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local key = ARGV[1] .. m
  if string.sub(m, -1) ~= '!' and not is_tail(key) then
    local agent = redis.call('HGET', key, 'agent')
    if agent and (ARGV[2] == '' or agent == ARGV[2]) then
      redis.call('RENAME', key, key .. '!')
      redis.call('SREM', KEYS[1], m)
      redis.call('SADD', KEYS[1], m .. '!')
      redis.call('SET', KEYS[1] .. ':released:' .. m, '1', 'PX', ARGV[3])
      out[#out + 1] = m
    end
  end
end
return out
`

// revokedLiveSrc says, of each revoked record given, whether it is still a
// hold: there and not a tail. KEYS: the revoked records. Returns 1 or 0 each.
const revokedLiveSrc = tailsLua + `
local out = {}
for i, key in ipairs(KEYS) do
  out[i] = 0
  if redis.call('EXISTS', key) == 1 and not is_tail(key) then out[i] = 1 end
end
return out
`

// delayedSrc returns the master's ms at which the name's last tail ends
// (0: none). KEYS: set. ARGV: holder key prefix.
const delayedSrc = tailsLua + `
local last = 0
for _, m in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local key = ARGV[1] .. m
  if is_tail(key) then
    local ttl = redis.call('PTTL', key)
    if ttl > 0 then last = math.max(last, tail_now() + ttl) end
  end
end
return last
`

var (
	endScript         = newScript(endSrc, -1)
	revokeScript      = newScript(revokeSrc, -1)
	revokedLiveScript = newScript(revokedLiveSrc, -1)
	delayedScript     = newScript(delayedSrc, -1)
)

func init() {
	allScripts = append(allScripts, endScript, revokeScript, revokedLiveScript, delayedScript)
}

// End ends holder's hold of name, which has a Tail, on every connected
// master, as Release does one without: the name then stays unavailable
// for what is left of its min_hold, or its delay if clean is false
// (whichever is longer). It says whether a majority keeps a tail.
func (c *Cluster) End(ctx context.Context, name, holder string, clean bool) (bool, error) {
	keys, args := c.releaseArgs(name, holder, name)
	keys = append(keys, c.markerKey())
	args = append(args, "0")
	if clean {
		args[len(args)-1] = "1"
	}
	tails := 0
	r, _ := c.vote(ctx, roundSpec{op: OpRelease, script: endScript, keys: keys, args: args, land: true,
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

// DelayedUntil returns when the tail of name ends (see tailsLua) as a
// majority of the voting masters have it, in Unix ms of their clocks, or 0
// while no majority has one; with masters that did not answer, the latest
// end that the answers do not rule out as a majority's (see readQuorum).
func (c *Cluster) DelayedUntil(ctx context.Context, name string) (int64, error) {
	var ends []int64
	r, never := c.vote(ctx, roundSpec{op: OpWho, script: delayedScript, keys: []string{c.setKey(name)}, args: []string{c.holderPrefix(name)}, whole: true,
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
	return ends[len(ends)-readQuorum(c.quorum, len(c.masters)-len(ends))], nil // the latest end a majority may have
}

// revokePrefix starts a revocation's message on the revocations channel:
// "revoke HOLDER REASON".
const revokePrefix = "revoke "

// revocations is the channel of revocations: every agent listens to it
// (see WatchRevocations), and learns of a hold of its own that REVOKE ended
// without waiting for its next renewal.
func (c *Cluster) revocations() string { return c.cfg.KeyPrefix + "revocations" }

// WatchRevocations subscribes to revocations, which Config.OnRevoke hears,
// until the watch is closed.
func (c *Cluster) WatchRevocations(ctx context.Context) *Watch {
	return c.watchChannel(ctx, c.revocations())
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
// revokeSrc), its agent is told on the revocations channel, and Revoke
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
			m.publish(ctx, c.revocations(), revocation(h, reason))
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

// revokeRound runs revokeSrc on the masters and returns the holders that a
// majority revoked.
func (c *Cluster) revokeRound(ctx context.Context, name, agent string) ([]string, error) {
	counts := map[string]int{}
	var order []string
	r, never := c.vote(ctx, roundSpec{op: OpRelease, script: revokeScript, keys: []string{c.setKey(name)},
		args: []string{c.holderPrefix(name), agent, strconv.FormatInt(c.cfg.Tombstone.Milliseconds(), 10)}, whole: true,
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
		keys[i] = c.holderKey(name, h) + "!"
	}
	ended := make([]int, len(holders))
	r, never := c.vote(ctx, roundSpec{op: OpWho, script: revokedLiveScript, keys: keys, whole: true,
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
