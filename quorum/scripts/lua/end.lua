-- end.lua ends a hold that has a Tail (see tails.lua), as release.lua ends
-- one that has none: the record (or its revoked form) becomes a tail for
-- what is left of min_hold, or for its delay if the end is unclean
-- (ARGV[5] "0"), whichever is longer; with nothing left it is dropped.
-- Either way the name's waiters anywhere are woken: they read the tail's
-- end. It leaves a tombstone as release.lua does. A tail already there is
-- left as it is.
-- KEYS: set, holder key, marker. ARGV: holder, channel, message, tombstone ms,
-- clean (1 or 0). Returns 2 if a tail is now kept, 1 if the record was
-- dropped, 0 if there was none.
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
