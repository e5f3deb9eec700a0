package quorum

import (
	"crypto/sha1"
	"encoding/hex"
	"strings"
)

// A name's keys on one master all share the hash tag {name}:
//
//	P{name}            set of holder ids that may hold the name
//	P{name}:h:HOLDER   one per holder: a hash of its claim (mode, limit, slot),
//	                   fence, who-info (agent, pid, uid, owner, since) and value; PX = its lease
//	P{name}:fence      the fence counter; never expires
//	P{name}:released:HOLDER  tombstone of a release that found no key (see releaseSrc)
//	P{name}:q          the name's queue (fair=true, and writers that readers
//	                   block): a sorted set of entries "ID|mode|limit" scored
//	                   by their settled ticket; ties order by ID (an
//	                   entry is written only once its ticket is settled)
//	P{name}:qd         each entry's heartbeat deadline (ms, master clock)
//	P{name}:qseq       the ticket counter; never expires
//	P{name}:qx:ENTRY   tombstone of an entry that left (see dequeueSrc)
//	P{name}:obs        set while some agent observes the name (OBSERVE); PX =
//	                   a lease, renewed by that agent: a grant then says so
//	                   on the name's channel (see leaderMessage)
//	P{name}:w, :wd     each agent's waiting record and its deadline (see waiting.go)
//	Pepoch             the master's epoch marker: a hash {epoch, until, floor,
//	                   run, settings, how} (see gateLua; how is "plant" on a
//	                   master that had none, "restart" over another server's,
//	                   "change" by the settings command, none by bootstrap)
//
// The set expires no sooner than any member's holder key, so a live holder
// key is always listed. A listed member whose holder key is gone is stale and
// is dropped by the next acquire.
//
// Scripts touch the epoch marker beside a name's keys, so on a master that
// is a Redis Cluster the marker is one per hash slot (see slots.go), and a
// call's generic marker key is that of its name's slot.

// gateLua is the first thing every script that votes runs: it refuses the
// vote of a master that lost its data, or that records other settings. The
// epoch marker is planted once; a master that restarted empty or was
// flushed has none, and one that restarted from a snapshot (RDB, an AOF not
// fsynced always, a backup) or had its data replaced (REPLICAOF) has one
// that another server process left (the marker records the run_id), so its
// data may be stale: the first script to meet it plants a new one whose
// quarantine ends ARGV-given ms later on the master's own clock. Every
// agent, including one started during the quarantine, reads the same end
// from the master, and no vote of an emptied master counts until every hold
// it may have forgotten has ended.
//
// The marker also records the cluster's settings (see Settings), checked on
// every vote: a master whose marker records other settings than the
// agent's refuses with the error reply "SETTINGS <recorded>", so that no
// agent counts the vote of a master planted with another lease or
// quarantine (a late agent with a shorter quarantine would otherwise make
// an emptied master vote again before the holds it forgot had ended). A
// marker that records none (planted before settings were recorded, or by
// an older bootstrap) votes as it did, and adopts the agent's settings. An
// agent plants or adopts only when it may (see Cluster.mayPlant): otherwise
// a master with no marker refuses with "UNPLANTED", and does not vote until
// an agent that may plants one; one whose marker records none votes
// without adopting.
//
// gate(marker, epoch argument, gate argument) returns the ms of quarantine
// left (0: may vote) and the marker's fence floor (see acquireSrc). The
// epoch argument is "EPOCH;RUN" (RUN: the run_id the agent verified), the
// gate argument "QUARANTINE_MS MAY_PLANT SETTINGS" (MAY_PLANT 1 or 0; see
// Cluster.gateArgs, which builds both).
//
// A marker the gate plants says tails=pending: the probe then lengthens its
// quarantine to the tails the other masters keep (see horizon.go).
//
// The gate runs before every vote, so it is kept to one call in the common
// case: once a quarantine is found over, its end is written as 0 (it never
// starts again: a new one comes with a new marker), and later gates need not
// read the clock.
const gateLua = `
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function run_id()
  local info = redis.pcall('INFO', 'server')
  if type(info) ~= 'string' then return '' end
  return string.match(info, 'run_id:(%x+)') or ''
end
local CHECK_RUN = true
local function plant(marker, epoch, quarantine, settings, run, how)
  local now = math.floor(now_us() / 1000)
  local floor = (math.floor(now / 1000) + 1) * 1000000
  redis.call('HSET', marker, 'epoch', epoch, 'until', string.format('%d', now + quarantine),
    'floor', string.format('%d', floor), 'run', run, 'settings', settings, 'how', how, 'tails', 'pending')
  return quarantine, floor
end
local function gate_args(gatearg)
  local quarantine, may_plant, settings = string.match(gatearg, '^(%d+) (%d) (.*)$')
  return tonumber(quarantine) or 0, may_plant == '1', settings or ''
end
local function gate(marker, epocharg, gatearg)
  local epoch, expected = string.match(epocharg, '^(.-);(.*)$')
  if not epoch then epoch, expected = epocharg, '' end
  local quarantine, may_plant, settings = gate_args(gatearg)
  local m = redis.call('HMGET', marker, 'epoch', 'until', 'floor', 'run', 'settings')
  local known = m[4] and m[4] ~= ''
  local run = ''
  if CHECK_RUN then run = run_id() end
  if not m[1] or (known and run ~= '' and m[4] ~= run) then
    if not may_plant then error({err = 'UNPLANTED'}) end
    local how = 'plant' -- it had none: new, or emptied (restarted empty, flushed)
    if m[1] then how = 'restart' end -- another server process's: restored, replaced
    return plant(marker, epoch, quarantine, settings, run, how)
  end
  local recorded = m[5] or ''
  if recorded ~= settings then
    if recorded ~= '' then error({err = 'SETTINGS ' .. recorded}) end
    if may_plant then redis.call('HSET', marker, 'settings', settings) end
  end
  if m[2] ~= '0' then
    local left = (tonumber(m[2]) or 0) - math.floor(now_us() / 1000)
    if left > 0 then return left, tonumber(m[3]) or 0 end
    redis.call('HSET', marker, 'until', '0')
  end
  if not CHECK_RUN and known and expected ~= '' and m[4] ~= expected then
    return 1, 0 -- another server's marker, or the agent's view is old: no vote until a probe looks
  end
  if not known and run ~= '' then redis.call('HSET', marker, 'run', run) end
  return 0, tonumber(m[3]) or 0
end
`

// queueLua is the queue rule, run by acquire once a claim is compatible with
// the holders: it may not pass a live entry ahead of its own (ahead of every
// entry, for a claim with none: a request that does not queue counts as
// arriving after all of them) that it conflicts with. Entries whose
// heartbeat ran out (their agent died) are dropped first. For a semaphore,
// the entries ahead with its limit wait for free slots first.
// queue_wait(queue, deadlines, own entry, mode, limit, free slots), called
// only when the queue exists, returns -1 if the claim may be granted, else
// the ms until the soonest blocking entry's heartbeat runs out (the fallback
// wake-up: a leaving entry publishes).
const queueLua = `
local function queue_wait(q, qd, me, mode, limit, free)
  local now = math.floor(now_us() / 1000)
  for _, d in ipairs(redis.call('ZRANGEBYSCORE', qd, '-inf', now)) do
    redis.call('ZREM', q, d)
    redis.call('ZREM', qd, d)
  end
  local wait, ahead = -1, 0
  for _, e in ipairs(redis.call('ZRANGE', q, 0, -1)) do
    if e == me then break end
    local em, el = string.match(e, '|(%a+)|(%d+)$')
    el = tonumber(el) or 1
    local blocks
    if limit > 1 and el == limit then
      ahead = ahead + 1
      blocks = ahead >= free
    else
      blocks = el ~= limit or mode ~= 'shared' or em ~= 'shared'
    end
    if blocks then
      local left = math.max((tonumber(redis.call('ZSCORE', qd, e)) or now) - now, 0)
      if wait < 0 or left < wait then wait = left end
    end
  end
  if redis.call('ZCARD', q) == 0 then redis.call('DEL', q, qd) end
  return wait
end
`

// fencesLua takes fences from a name's counter (see acquireSrc):
// take_fences(counter key, the gate's floor, B) reserves B fences and
// returns the first; the counter is left at the last.
const fencesLua = `
local function take_fences(key, floor, block)
  local cur = redis.call('GET', key)
  local fence
  if cur then fence = math.max(tonumber(cur) + 1, floor) else fence = math.max(math.floor(now_us() / 1000000) * 1000000, floor) end
  redis.call('SET', key, string.format('%d', fence + block - 1))
  return fence
end
`

// recordFields are the fields of a holder's record hash, in the order the
// scripts take and return them.
var recordFields = []string{"mode", "limit", "slot", "fence", "agent", "pid", "uid", "owner", "since", "value"}

// acquireSrc grants HOLDER a claim on the name if it is compatible with
// every other live holder, and HOLDER's attempt was not already released (a
// tombstone: see releaseSrc). Claims: an exclusive lock (limit 1) goes with
// no other holder; a shared one with shared ones only; a semaphore of limit
// K > 1 takes one of K slots (the one asked for, or the lowest free), with
// holders of the same K only.
// A claim the holders allow must also pass the queue rule (see queueLua).
// KEYS: set, fence, holder key, marker, queue, queue deadlines, the
// observed mark. ARGV: holder, lease ms, holder key prefix, epoch,
// quarantine ms, mode, limit, slot (0: any), agent, pid, uid, owner, since,
// the claim's queue entry (”: none), fence block (absent: 1), the hold's
// delay ms and min_hold ms (absent or 0: none; see tailsLua), value.
// A grant of an observed name (the mark exists: see Cluster.MarkObserved)
// marks its record's fence awaiting its agent's word (settled is
// awaitingAgent: see awaitingAgent) and returns {1, fence, slot, 1}; the
// agent's mark, once the grant stood, publishes leaderMessage on the
// name's channel.
// Returns {1, fence, slot} on grant, {0, ms until a conflicting lease ends
// (the longest; for a full semaphore the shortest), 1 if only shared
// holders block it, 1 if only cached records block it, 1 if only records
// that caching agents keep block it (see cache.go)} when held (and marks
// the records in its way wanted: their agents do not cache them), {0, ms, 0} when the queue blocks it (ms: see
// queueLua), {0, -1} when
// the attempt was released before it arrived, {-2, ms} while the master is
// quarantined, {-3, K} when live holders have another kind (K their limit, 1
// for a lock).
//
// The fence counter is a hybrid clock: a counter that is missing (a new name,
// or a master that lost its data) starts at the master's time, in whole
// seconds counted in µs (so that masters agree on a new name's first fence
// and no write-back is needed), and every fence is at least the marker's
// floor: the whole second after the master was found empty or stale (a
// stale counter is behind fences already issued). Each grant adds one, and a
// grant takes far more than a µs, so a fence never repeats or goes back even
// when every master lost its counters, as long as master clocks do not step
// back and differ by less than the quarantine.
//
// A grant may reserve a block of B fences (ARGV[15]): the grant's fence F is
// the block's first, the counter is left at its last, F+B-1, and the holder's
// agent hands F+1 … F+B-1 to local holders in turn without asking the masters
// (lock cohorting). The next grant anywhere counts past the whole block. The
// clock bound holds while a grant of B fences takes more than B µs: the agent
// asks for a block only while other local waiters queue behind the one it
// works for, and keeps B small (cohort_max_handoffs+1). A run that goes on
// reserves a further block (reserveSrc) only after a quarter of its current
// one was handed out: a grant then costs at most 2B fences, over a grant
// round and B/4 hand-overs (each a client's answer and its next request,
// a few µs at the very least), and a run that goes on B per B hand-overs.
const acquireSrc = gateLua + queueLua + fencesLua + tailsLua + acquireBody

const acquireBody = `
local q, floor = gate(KEYS[4], ARGV[4], ARGV[5])
if q > 0 then return {-2, q} end
-- The tombstone and the queue are looked up in one call: mostly neither is there.
local tomb = KEYS[1] .. ':released:' .. ARGV[1]
local queued = false
if redis.call('EXISTS', tomb, KEYS[5]) > 0 then
  if redis.call('EXISTS', tomb) == 1 then return {0, -1} end
  queued = true
end
local mode, limit, want = ARGV[6], tonumber(ARGV[7]), tonumber(ARGV[8])
local wait, soonest, conflict, readers, tail, cached, kept = -1, -1, 0, 1, -1, 1, 1
local taken, blockers = {}, {}
local members = 0 -- left in the set: none means it is gone, and SADD makes it anew
for _, m in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  members = members + 1
  if m ~= ARGV[1] then
    local key = ARGV[3] .. m
    local ttl = redis.call('PTTL', key)
    if ttl == -2 then
      redis.call('SREM', KEYS[1], m)
      members = members - 1
    else
      local h = redis.call('HMGET', key, 'mode', 'limit', 'slot', 'until', 'cached', 'wanted', 'kept')
      local hl = tonumber(h[2]) or 1
      if h[4] and tonumber(h[4]) <= tail_now() then
        tail = math.max(tail, ttl) -- a tail (see tailsLua) blocks every claim
      elseif hl ~= limit and (hl > 1 or limit > 1) then
        conflict = hl
      elseif limit > 1 then
        taken[tonumber(h[3]) or 0] = true
        if soonest < 0 or ttl < soonest then soonest = ttl end
      elseif mode ~= 'shared' or h[1] ~= 'shared' then
        if ttl > wait then wait = ttl elseif wait < 0 then wait = 0 end
        if h[1] ~= 'shared' then readers = 0 end
        if h[5] ~= '1' then cached = 0 end
        if h[7] ~= '1' then kept = 0 end
        if h[6] ~= '1' then blockers[#blockers + 1] = key end -- marked once, not on every retry
      end
    end
  end
end
if tail >= 0 then return {0, math.max(tail, wait, soonest), 0} end
if conflict > 0 then return {-3, conflict} end
local slot, free = 0, 0
if limit > 1 then
  for s = 1, limit do
    if not taken[s] then free = free + 1 end
  end
  if want > 0 then
    if want <= limit and not taken[want] then slot = want end
  else
    for s = 1, limit do
      if not taken[s] then slot = s break end
    end
  end
  if slot == 0 then return {0, math.max(soonest, 0), 0} end
elseif wait >= 0 then
  for _, key in ipairs(blockers) do redis.call('HSET', key, 'wanted', '1') end
  return {0, wait, readers, cached, kept}
end
if queued then
  local qwait = queue_wait(KEYS[5], KEYS[6], ARGV[14], mode, limit, free)
  if qwait >= 0 then return {0, qwait, 0} end
end
local fence = string.format('%d', take_fences(KEYS[2], floor, math.max(tonumber(ARGV[15] or '1') or 1, 1)))
redis.call('HSET', KEYS[3], 'mode', mode, 'limit', ARGV[7], 'slot', slot, 'fence', fence,
  'agent', ARGV[9], 'pid', ARGV[10], 'uid', ARGV[11], 'owner', ARGV[12], 'since', ARGV[13], 'value', ARGV[18] or '')
local px = tail_grant(KEYS[4], KEYS[3], tonumber(ARGV[2]), tonumber(ARGV[16]) or 0, tonumber(ARGV[17]) or 0)
redis.call('PEXPIRE', KEYS[3], px)
redis.call('SADD', KEYS[1], ARGV[1])
if members == 0 or redis.call('PTTL', KEYS[1]) < px then
  redis.call('PEXPIRE', KEYS[1], px)
end
if KEYS[7] and redis.call('EXISTS', KEYS[7]) == 1 then
  redis.call('HSET', KEYS[3], 'settled', '` + awaitingAgent + `')
  return {1, tonumber(fence), slot, 1}
end
return {1, tonumber(fence), slot}
`

// renewSrc sets the lease of many holds at once: one script call per batch
// keeps the watchdog's cost per hold small. Used by the watchdog and EXTEND.
// A queue entry's heartbeat rides in the same batch: its keys are the queue
// and its deadlines, its holder id the entry, and its lease "q" and the ms;
// it is renewed only while the entry is queued (never re-added: it may have
// left meanwhile). A hold with a tail has the lease "t" and the ms (see
// tailsLua); other holds pay nothing for tails. An agent's waiting record
// rides it too (see waiting.go): its keys are the deadlines and the records,
// its holder id the agent's instance, its lease "w" and the ms; renewed only
// while it is there and its deadline has not passed (a lapsed one is gone),
// and both keys live at least as long.
// KEYS: marker, then for each hold its set key, and for a queue entry or
// a waiting record its second key (a hold's holder key is its set key,
// ":h:" and its holder id: sent, it was ~45% of a renewal's bytes). ARGV:
// epoch, quarantine ms, then each hold's holder id and lease ms.
// Returns {0, r1, r2, ...} with 1 where the hold was renewed and 0 where it is
// gone, or {-2, ms} while the master is quarantined.
const renewSrc = gateLua + tailsLua + `
local q = gate(KEYS[1], ARGV[1], ARGV[2])
if q > 0 then return {-2, q} end
local out = {0}
local now
local k = 2
for i = 3, #ARGV, 2 do
  local set, key, lease = KEYS[k], nil, ARGV[i + 1]
  local kind = string.sub(lease, 1, 1)
  if kind == 'q' or kind == 'w' then
    key, k = KEYS[k + 1], k + 2
  else
    key, k = set .. ':h:' .. ARGV[i], k + 1
  end
  if kind == 'q' then
    if redis.call('ZSCORE', set, ARGV[i]) then
      now = now or math.floor(now_us() / 1000)
      redis.call('ZADD', key, 'XX', now + tonumber(string.sub(lease, 2)), ARGV[i])
      out[#out + 1] = 1
    else
      out[#out + 1] = 0
    end
  elseif kind == 't' then
    now = now or math.floor(now_us() / 1000)
    out[#out + 1] = tail_renew(KEYS[1], set, key, ARGV[i], tonumber(string.sub(lease, 2)), now)
  elseif kind == 'w' then
    now = now or math.floor(now_us() / 1000)
    if (tonumber(redis.call('ZSCORE', set, ARGV[i])) or 0) > now then
      local ms = tonumber(string.sub(lease, 2))
      redis.call('ZADD', set, 'XX', now + ms, ARGV[i])
      for _, each in ipairs({set, key}) do
        if redis.call('PTTL', each) < ms then redis.call('PEXPIRE', each, ms) end
      end
      out[#out + 1] = 1
    else
      out[#out + 1] = 0
    end
  elseif redis.call('PEXPIRE', key, lease) == 1 then
    redis.call('SADD', set, ARGV[i])
    if redis.call('PTTL', set) < tonumber(lease) then redis.call('PEXPIRE', set, lease) end
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return out
`

// repairSrc re-creates a hold that a majority still has on a master that
// lacks it (it was down at the grant, or expired the key while paused), so
// the hold regains its full redundancy. It never re-creates it beside a
// holder it is not compatible with, never undoes a release, and raises the
// fence counter to the last fence of the hold's block (see acquireSrc).
// KEYS: set, fence, holder key, marker.
// ARGV: holder, lease ms, holder key prefix, epoch, quarantine ms, then the
// record's fields in recordFields order (ARGV[6..15]), then the block's last
// fence (absent: the record's fence), then the hold's tail (see tailsLua):
// its delay and what is left of its min_hold, in ms (absent: none). A hold
// that has a tail gets it back with the record, so that the tail stands on
// a majority even after a majority of the masters lost the record one by
// one while the hold lived on.
// Returns 2 if re-created, 1 if it was there, 0 if it may not be, -2 while quarantined.
const repairSrc = gateLua + tailsLua + `
local q = gate(KEYS[4], ARGV[4], ARGV[5])
if q > 0 then return -2 end
if redis.call('PEXPIRE', KEYS[3], ARGV[2]) == 1 then return 1 end
if redis.call('EXISTS', KEYS[1] .. ':released:' .. ARGV[1]) == 1 then return 0 end
local mode, limit, slot = ARGV[6], tonumber(ARGV[7]), ARGV[8]
for _, m in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if m ~= ARGV[1] then
    local key = ARGV[3] .. m
    if redis.call('PTTL', key) == -2 then
      redis.call('SREM', KEYS[1], m)
    else
      local h = redis.call('HMGET', key, 'mode', 'limit', 'slot')
      local hl = tonumber(h[2]) or 1
      if hl ~= limit then return 0 end
      if limit > 1 and h[3] == slot then return 0 end
      if limit == 1 and (mode ~= 'shared' or h[1] ~= 'shared') then return 0 end
    end
  end
end
redis.call('HSET', KEYS[3], 'mode', ARGV[6], 'limit', ARGV[7], 'slot', ARGV[8], 'fence', ARGV[9],
  'agent', ARGV[10], 'pid', ARGV[11], 'uid', ARGV[12], 'owner', ARGV[13], 'since', ARGV[14], 'value', ARGV[15])
local px = tail_grant(KEYS[4], KEYS[3], tonumber(ARGV[2]), tonumber(ARGV[17] or '0'), tonumber(ARGV[18] or '0'))
redis.call('PEXPIRE', KEYS[3], px)
redis.call('SADD', KEYS[1], ARGV[1])
if redis.call('PTTL', KEYS[1]) < px then
  redis.call('PEXPIRE', KEYS[1], px)
end
local top = math.max(tonumber(ARGV[9]), tonumber(ARGV[16] or ARGV[9]))
if tonumber(redis.call('GET', KEYS[2]) or '0') < top then
  redis.call('SET', KEYS[2], string.format('%d', top))
end
return 2
`

// releaseSrc drops HOLDER and wakes waiters anywhere with the message
// ARGV[3] (the name, or the give-back of a failed round that the agent's own
// waiters ignore: waking them made them spin). It always leaves a
// tombstone for tombstone ms, so that nothing brings the hold back: holder
// ids are one per acquire attempt, and commands can arrive out of order
// (reconnects, script reloads, deadlines, and the renewal connection), so an
// acquire of the attempt may land after its release, or a renewal's repair
// after it.
// It also drops the hold's revoked record (see revokeSrc), if there is one.
// KEYS: set, holder key. ARGV: holder, channel, message, tombstone ms.
// Returns 1 if it held.
const releaseSrc = releaseBody

const releaseBody = `
local held = math.min(redis.call('DEL', KEYS[2], KEYS[2] .. '!'), 1)
redis.call('SREM', KEYS[1], ARGV[1], ARGV[1] .. '!')
redis.call('SET', KEYS[1] .. ':released:' .. ARGV[1], '1', 'PX', ARGV[4])
if held == 1 then
  redis.call('PUBLISH', ARGV[2], ARGV[3])
end
return held
`

// downgradeSrc makes an exclusive hold shared and wakes waiters (readers
// may now be granted). KEYS: holder key. ARGV: channel, name.
// Returns 1 if the hold is there.
const downgradeSrc = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'mode', 'shared')
redis.call('PUBLISH', ARGV[1], ARGV[2])
return 1
`

// raiseFenceSrc raises the fence counter to at least ARGV[2], the last
// fence of the grant's block, and, if the holder's record is given and
// exists, makes it carry the grant's fence ARGV[1], unless it carries a
// later one that is settled: a hand-over's retag, which may land before a
// write-back sent earlier (a later one not settled is the master's own,
// from a grant it ran late, which the grant's fence replaces). With
// ARGV[4] "1" it also marks that fence settled (the field settled: only
// the granting agent sends it, once the grant stood, so a reader of the
// record knows the term's fence without waiting for the masters that
// refused the grant: see markSettled, Cluster.Leader). A
// record written on an observed name (KEYS[3] exists) publishes
// leaderMessage on the channel ARGV[3], so that observers read again.
// KEYS: fence, holder key (optional), observed mark (with the holder key).
// ARGV: fence, block end, and with the holder key: channel, mark.
// Returns the counter after.
const raiseFenceSrc = `
local rec = KEYS[2] and redis.call('HMGET', KEYS[2], 'fence', 'settled')
if rec and rec[1] and (tonumber(rec[1]) <= tonumber(ARGV[1]) or rec[1] ~= rec[2]) then
  redis.call('HSET', KEYS[2], 'fence', ARGV[1])
  if ARGV[4] == '1' then redis.call('HSET', KEYS[2], 'settled', ARGV[1]) end
  if redis.call('EXISTS', KEYS[3]) == 1 then redis.call('PUBLISH', ARGV[3], 'leader changed') end
end
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local want = math.max(tonumber(ARGV[1]), tonumber(ARGV[2]))
if cur < want then
  redis.call('SET', KEYS[1], string.format('%d', want))
  return want
end
return cur
`

// reserveSrc reserves a further block of fences for a hold its agent
// passes among local holders (lock cohorting), without a new grant: the
// hold must still be there, its record and its place in the holder set.
// KEYS: set, fence, holder key, marker. ARGV: holder, epoch, quarantine ms,
// block. Returns {1, the block's first fence}, {0} if the hold is not
// there, or {-2, ms} while the master is quarantined.
const reserveSrc = gateLua + fencesLua + `
local q, floor = gate(KEYS[4], ARGV[2], ARGV[3])
if q > 0 then return {-2, q} end
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 0 or redis.call('EXISTS', KEYS[3]) == 0 then return {0} end
return {1, take_fences(KEYS[2], floor, tonumber(ARGV[4]))}
`

// enqueueSrc gives each entry a ticket from the master's counter, which
// counts like a fence (a hybrid clock: at least the master's time in whole
// seconds, in µs), so that masters roughly agree. It writes no entry: an
// entry is queued only by settleSrc, with the highest ticket a majority
// gave, so that no master orders a queue by a ticket that may still change
// (a LOCK that a master met before the settled ticket of an entry ahead of
// it could otherwise be ordered before that entry there). An entry already
// queued keeps its ticket; one that left (a tombstone) gets none (0).
// KEYS: queue, ticket counter, marker. ARGV: epoch, quarantine ms,
// tombstone prefix, then the entries in arrival order.
// Returns {0, ticket...}, or {-2, ms} while quarantined.
const enqueueSrc = gateLua + `
local q = gate(KEYS[3], ARGV[1], ARGV[2])
if q > 0 then return {-2, q} end
local base = math.floor(now_us() / 1000000) * 1000000
local out = {0}
for i = 4, #ARGV do
  local m, t = ARGV[i], 0
  if redis.call('EXISTS', ARGV[3] .. m) == 0 then
    local s = redis.call('ZSCORE', KEYS[1], m)
    if s then
      t = tonumber(s)
    else
      t = math.max(tonumber(redis.call('GET', KEYS[2]) or '0') + 1, base)
      redis.call('SET', KEYS[2], string.format('%d', t))
    end
  end
  out[#out + 1] = t
end
return out
`

// settleSrc queues each entry with its settled ticket (the highest a
// majority gave it), so that every master orders the queue alike, and
// raises the counter past it, so that an entry made after this one reached
// a majority gets a later ticket on every master of that majority. An
// entry that left meanwhile (a tombstone) is not brought back.
// KEYS: queue, deadlines, ticket counter. ARGV: heartbeat ms, tombstone
// prefix, then entry and ticket pairs. Returns 1.
const settleSrc = `
local t = redis.call('TIME')
local deadline = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[1])
for i = 3, #ARGV, 2 do
  local m, ticket = ARGV[i], ARGV[i + 1]
  if redis.call('EXISTS', ARGV[2] .. m) == 0 then
    redis.call('ZADD', KEYS[1], ticket, m)
    redis.call('ZADD', KEYS[2], deadline, m)
    if tonumber(redis.call('GET', KEYS[3]) or '0') < tonumber(ticket) then
      redis.call('SET', KEYS[3], ticket)
    end
  end
end
return 1
`

// dequeueSrc takes entries out of the name's queue and wakes its waiters
// anywhere. It leaves a tombstone of each for tombstone ms: an enqueue or
// settle of the entry still on its way (another connection, a reconnect)
// must not bring it back to block the queue for a heartbeat.
// KEYS: queue, deadlines. ARGV: channel, message, tombstone prefix,
// tombstone ms, then the entries. Returns how many were queued.
const dequeueSrc = `
local n = 0
for i = 5, #ARGV do
  n = n + redis.call('ZREM', KEYS[1], ARGV[i])
  redis.call('ZREM', KEYS[2], ARGV[i])
  redis.call('SET', ARGV[3] .. ARGV[i], '1', 'PX', ARGV[4])
end
if redis.call('ZCARD', KEYS[1]) == 0 then redis.call('DEL', KEYS[1], KEYS[2]) end
if n > 0 then redis.call('PUBLISH', ARGV[1], ARGV[2]) end
return n
`

// queueLenSrc counts the live entries of a name's queue. KEYS: deadlines.
const queueLenSrc = `
local t = redis.call('TIME')
return redis.call('ZCOUNT', KEYS[1], string.format('(%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)), '+inf')
`

// retagSrc makes a live record name its current holder: the fence and
// who-info of a hold that its agent passed to another local holder (see
// AcquireRequest.FenceBlock). It never creates a record. It writes no fence
// counter: the block's end is there since the grant. The fences of a run
// only grow, so a retag that comes after a later one (Retag does not wait
// for a slow master before the next) changes nothing. The fence comes from
// a reserved block, so it is final: it is marked settled, as raiseFenceSrc
// marks a grant's.
// A new holder is a new leader: if the name is observed (KEYS[2] exists)
// it publishes leaderMessage on the channel ARGV[8].
// KEYS: holder key, observed mark. ARGV: fence, agent, pid, uid, owner,
// since, value, channel.
// Returns 1 if the record is there.
const retagSrc = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if (tonumber(redis.call('HGET', KEYS[1], 'fence')) or 0) > tonumber(ARGV[1]) then return 1 end
redis.call('HSET', KEYS[1], 'fence', ARGV[1], 'settled', ARGV[1], 'agent', ARGV[2], 'pid', ARGV[3], 'uid', ARGV[4], 'owner', ARGV[5], 'since', ARGV[6], 'value', ARGV[7] or '')
if KEYS[2] and redis.call('EXISTS', KEYS[2]) == 1 then redis.call('PUBLISH', ARGV[8], 'leader changed') end
return 1
`

// whoSrc lists the live holders: {holder, the record's fields in
// recordFields order, its settled fence (see raiseFenceSrc; "" if not
// marked), its cached mark (see cache.go), ...}; a tail holds nothing (see
// delayedSrc).
// KEYS: set. ARGV: holder key prefix.
const whoSrc = tailsLua + `
local out = {}
` + whoBody

// whoBody appends the live holders to out and returns it (see whoSrc).
const whoBody = `
for _, m in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local key = ARGV[1] .. m
  if redis.call('EXISTS', key) == 1 and not is_tail(key) then
    table.insert(out, m)
    for _, v in ipairs(redis.call('HMGET', key, 'mode', 'limit', 'slot', 'fence', 'agent', 'pid', 'uid', 'owner', 'since', 'value', 'settled', 'cached')) do
      table.insert(out, v or '')
    end
  end
end
return out
`

// markerSrc is the health probe: it runs the gate (planting a quarantined
// marker on a master that has none, when the agent may) and returns
// {epoch, ms of quarantine left, run_id, recorded settings, refusal, how},
// how being how the marker came to be ("plant": on a master that had none;
// "restart": over another server's; "change": the settings command; "": a
// bootstrap, or a marker older than how), and where
// refusal is "" when the master may vote (after its quarantine), else the
// gate's refusal ("SETTINGS ...", "UNPLANTED", or an error of the master's),
// or "REPLANTED <old settings>". With ARGV[3] "1" (the agent knows that a
// majority records its settings: see Cluster.replant), a marker recording
// other settings is planted anew with the agent's, as a master that lost
// its data is (new epoch, full quarantine: whatever it holds was granted
// under other settings), so that the cluster heals; not one that the
// settings command wrote (how=change): that is the cluster's new setting,
// which an agent that still runs with the old one must not undo.
// KEYS: marker. ARGV: epoch argument, gate argument, replant.
const markerSrc = gateLua + `
local ok, q = pcall(gate, KEYS[1], ARGV[1], ARGV[2])
local refusal = ''
if not ok then
  refusal = (type(q) == 'table' and q.err) or tostring(q)
  q = 0
  local old = redis.call('HGET', KEYS[1], 'settings') or ''
  if ARGV[3] == '1' and string.sub(refusal, 1, 9) == 'SETTINGS ' and redis.call('HGET', KEYS[1], 'how') ~= 'change' then
    local quarantine, _, settings = gate_args(ARGV[2])
    q = plant(KEYS[1], string.match(ARGV[1], '^(.-);') or ARGV[1], quarantine, settings, run_id(), 'plant')
    refusal = 'REPLANTED ' .. old
  end
end
local h = redis.call('HMGET', KEYS[1], 'epoch', 'run', 'settings', 'how')
return {h[1] or '', q, h[2] or '', h[3] or '', refusal, h[4] or ''}
`

// bootstrapSrc plants an epoch marker with no quarantine on a master that
// has none, recording the settings ARGV[2] (may be ""). On a master that
// has one recording no settings, it records ARGV[2]. Only for masters
// known to be new: see Bootstrap.
// KEYS: marker. ARGV: epoch, settings. Returns 1 if planted, 2 if it
// recorded the settings in a marker there, 0 if it left the marker as it was.
const bootstrapSrc = gateLua + `
if redis.call('EXISTS', KEYS[1]) == 1 then
  local recorded = redis.call('HGET', KEYS[1], 'settings') or ''
  if recorded ~= '' or ARGV[2] == '' then return 0 end
  redis.call('HSET', KEYS[1], 'settings', ARGV[2])
  return 2
end
redis.call('HSET', KEYS[1], 'epoch', ARGV[1], 'until', '0', 'run', run_id(), 'settings', ARGV[2])
return 1
`

// changeSrc records new settings in a master's marker (the settings
// command: see ChangeSettings), with a quarantine that ends ARGV[3] ms from
// now (or later, if one ends later already): no agent's vote counts on it
// meanwhile, so every hold granted under the old settings ends first. A
// master with no marker gets one, as the gate plants it. The marker is
// marked how=change: agents whose settings differ do not re-plant it.
// KEYS: marker. ARGV: epoch (for a master with none), settings, quarantine
// ms. Returns {1, the settings recorded before ("" if none)}.
const changeSrc = gateLua + `
local old = redis.call('HMGET', KEYS[1], 'epoch', 'until', 'settings')
local quarantine = tonumber(ARGV[3])
if not old[1] then
  plant(KEYS[1], ARGV[1], quarantine, ARGV[2], run_id(), 'change')
  return {1, ''}
end
local ends = math.floor(now_us() / 1000) + quarantine
if old[2] and old[2] ~= '0' then ends = math.max(ends, tonumber(old[2]) or 0) end
redis.call('HSET', KEYS[1], 'settings', ARGV[2], 'until', string.format('%d', ends), 'how', 'change')
return {1, old[3] or ''}
`

// script is a Lua script with its SHA1, run by EVALSHA with an EVAL fallback.
type script struct {
	src, sha string
	// gateArg is, for a script that runs the gate, the index of its epoch
	// argument, to which each master's call appends ";" and the run_id the
	// agent last verified for that master (-1 for other scripts).
	gateArg int
	// afterRestart, for a script that runs the gate, is the variant whose
	// gate reads the server's run_id (INFO server, a third of the
	// throughput if done on every call). EVALSHA runs the variant that only
	// compares the marker's run_id with the one the agent verified (which
	// finds data copied from another master, REPLICAOF); a master that
	// restarted has lost its script cache, so its first EVALSHA answers
	// NOSCRIPT and the fallback EVAL runs this one, in the same round. The
	// probe always runs it.
	afterRestart *script
	// sharded is the variant a master that is a Redis Cluster runs: its
	// fallback (see shards.go), publishing with SPUBLISH, which reaches
	// only the shard of the channel's slot (see shardwatch.go).
	sharded *script
}

func newScript(src string, gateArg int) *script {
	sum := sha1.Sum([]byte(src))
	s := &script{src: src, sha: hex.EncodeToString(sum[:]), gateArg: gateArg}
	if strings.Contains(src, "local CHECK_RUN = true") {
		s.afterRestart = &script{src: src, sha: s.sha, gateArg: gateArg}
		s.src = strings.Replace(src, "local CHECK_RUN = true", "local CHECK_RUN = false", 1)
		sum := sha1.Sum([]byte(s.src))
		s.sha = hex.EncodeToString(sum[:])
	}
	sharded := shardedVariant(s.fallback())
	for _, v := range []*script{s, s.afterRestart, sharded} {
		if v != nil {
			v.sharded = sharded // whichever variant a cluster master is handed
		}
	}
	return s
}

// shardedVariant is s publishing with SPUBLISH instead of PUBLISH; s itself
// if it publishes nothing.
func shardedVariant(s *script) *script {
	const publish, spublish = "redis.call('PUBLISH',", "redis.call('SPUBLISH',"
	if !strings.Contains(s.src, publish) {
		return s
	}
	src := strings.ReplaceAll(s.src, publish, spublish)
	sum := sha1.Sum([]byte(src))
	return &script{src: src, sha: hex.EncodeToString(sum[:]), gateArg: s.gateArg}
}

// fallback is what runs when the master does not know s: see afterRestart.
func (s *script) fallback() *script {
	if s.afterRestart != nil {
		return s.afterRestart
	}
	return s
}

// allScripts are loaded into a master when it connects or loses its data.
var allScripts = []*script{acquireScript, renewScript, repairScript, releaseScript, raiseFenceScript, whoScript, markerScript, downgradeScript,
	enqueueScript, settleScript, dequeueScript, queueLenScript, retagScript, reserveScript, acquireManyScript, releaseManyScript}

var (
	acquireScript    = newScript(acquireSrc, 3)
	renewScript      = newScript(renewSrc, 0)
	repairScript     = newScript(repairSrc, 3)
	releaseScript    = newScript(releaseSrc, -1)
	raiseFenceScript = newScript(raiseFenceSrc, -1)
	whoScript        = newScript(whoSrc, -1)
	markerScript     = newScript(markerSrc, 0)
	bootstrapScript  = newScript(bootstrapSrc, -1)
	changeScript     = newScript(changeSrc, -1)
	downgradeScript  = newScript(downgradeSrc, -1)
	enqueueScript    = newScript(enqueueSrc, 0)
	settleScript     = newScript(settleSrc, -1)
	dequeueScript    = newScript(dequeueSrc, -1)
	queueLenScript   = newScript(queueLenSrc, -1)
	retagScript      = newScript(retagSrc, -1)
	reserveScript    = newScript(reserveSrc, 1)
)
