-- acquire.lua grants HOLDER a claim on the name if it is compatible with
-- every other live holder, and HOLDER's attempt was not already released (a
-- tombstone: see release.lua). Claims: an exclusive lock (limit 1) goes with
-- no other holder; a shared one with shared ones only; a semaphore of limit
-- K > 1 takes one of K slots (the one asked for, or the lowest free), with
-- holders of the same K only.
-- A claim the holders allow must also pass the queue rule (see queue.lua).
-- KEYS: set, fence, holder key, marker, queue, queue deadlines, the
-- observed mark. ARGV: holder, lease ms, holder key prefix, epoch,
-- quarantine ms, mode, limit, slot (0: any), agent, pid, uid, owner, since,
-- the claim's queue entry (”: none), fence block (absent: 1), the hold's
-- delay ms and min_hold ms (absent or 0: none; see tails.lua), value; each
-- from the entry on may be absent, as in acquire_lean.lua's calls, which
-- run this body for a name that is not fresh. The record holds the fence,
-- the who-info and only the fields of the claim's kind (see record.lua).
-- A grant of an observed name (the mark exists: see Cluster.MarkObserved)
-- marks its record's fence awaiting its agent's word (settled is
-- awaitingAgent: see awaitingAgent) and returns {1, fence, slot, 1}; the
-- agent's mark, once the grant stood, publishes leaderMessage on the
-- name's channel.
-- Returns {1, fence, slot} on grant, {0, ms until a conflicting lease ends
-- (the longest; for a full semaphore the shortest), 1 if only shared
-- holders block it, 1 if only cached records block it, 1 if only records
-- that caching agents keep block it (see quorum/cache.go)} when held (and marks
-- the records in its way wanted: their agents do not cache them), {0, ms, 0} when the queue blocks it (ms: see
-- queue.lua), {0, -1} when
-- the attempt was released before it arrived, {-2, ms} while the master is
-- quarantined, {-3, K} when live holders have another kind (K their limit, 1
-- for a lock).
--
-- The fence counter is a hybrid clock: a counter that is missing (a new name,
-- or a master that lost its data) starts at the master's time, in whole
-- seconds counted in µs (so that masters agree on a new name's first fence
-- and no write-back is needed), and every fence is at least the marker's
-- floor: the whole second after the master was found empty or stale (a
-- stale counter is behind fences already issued). Each grant adds one, and a
-- grant takes far more than a µs, so a fence never repeats or goes back even
-- when every master lost its counters, as long as master clocks do not step
-- back and differ by less than the quarantine.
--
-- A grant may reserve a block of B fences (ARGV[15]): the grant's fence F is
-- the block's first, the counter is left at its last, F+B-1, and the holder's
-- agent hands F+1 … F+B-1 to local holders in turn without asking the masters
-- (lock cohorting). The next grant anywhere counts past the whole block. The
-- clock bound holds while a grant of B fences takes more than B µs: the agent
-- asks for a block only while other local waiters queue behind the one it
-- works for, and keeps B small (cohort_max_handoffs+1). A run that goes on
-- reserves a further block (reserve.lua) only after a quarter of its current
-- one was handed out: a grant then costs at most 2B fences, over a grant
-- round and B/4 hand-overs (each a client's answer and its next request,
-- a few µs at the very least), and a run that goes on B per B hand-overs.
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
        tail = math.max(tail, ttl) -- a tail (see tails.lua) blocks every claim
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
write_record(KEYS[3], ARGV, fence, slot)
local px = tail_grant(KEYS[4], KEYS[3], tonumber(ARGV[2]), tonumber(ARGV[16]) or 0, tonumber(ARGV[17]) or 0)
redis.call('PEXPIRE', KEYS[3], px)
redis.call('SADD', KEYS[1], ARGV[1])
if members == 0 or redis.call('PTTL', KEYS[1]) < px then
  redis.call('PEXPIRE', KEYS[1], px)
end
if KEYS[7] and redis.call('EXISTS', KEYS[7]) == 1 then
  redis.call('HSET', KEYS[3], 'settled', 'pending')
  return {1, tonumber(fence), slot, 1}
end
return {1, tonumber(fence), slot}
