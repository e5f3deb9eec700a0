-- check.lua says whether a live holder of the name carries the fence: 1 or
-- 0. A tail (a hold that ended, kept while its delay or min_hold stands:
-- see tails.lua) is not current, nor a cached record (see cache.go).
-- KEYS: set. ARGV: holder key prefix, fence.
for _, m in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local key = ARGV[1] .. m
  local h = redis.call('HMGET', key, 'fence', 'cached')
  if h[1] == ARGV[2] and h[2] ~= '1' and not is_tail(key) then return 1 end
end
return 0
