-- repair.lua re-creates a hold that a majority still has on a master that
-- lacks it (it was down at the grant, or expired the key while paused), so
-- the hold regains its full redundancy. It never re-creates it beside a
-- holder it is not compatible with, never undoes a release, and raises the
-- fence counter to the last fence of the hold's block (see acquire.lua).
-- KEYS: set, fence, holder key, marker.
-- ARGV: holder, lease ms, holder key prefix, epoch, quarantine ms, then the
-- record's fields in recordFields order (ARGV[6..15]), then the block's last
-- fence (absent: the record's fence), then the hold's tail (see tails.lua):
-- its delay and what is left of its min_hold, in ms (absent: none). A hold
-- that has a tail gets it back with the record, so that the tail stands on
-- a majority even after a majority of the masters lost the record one by
-- one while the hold lived on.
-- Returns 2 if re-created, 1 if it was there, 0 if it may not be, -2 while quarantined.
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
