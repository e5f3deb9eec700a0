-- check.lua says whether a live holder of the name carries the fence: 1 or
-- 0. A tail (a hold that ended, kept while its delay or min_hold stands:
-- see tails.lua) is not current, nor a cached record (see quorum/cache.go) at the
-- fence it carries. An exclusive record kept as a cache (kept=1) carries
-- the fence its agent last noted (see NoteCaches, at most once per renewal
-- tick); a fence above it is one the agent lent since, from the blocks
-- reserved for the record (no other grant of the name can come while the
-- record stands), so it is current.
-- KEYS: set. ARGV: holder key prefix, fence.
local fence = tonumber(ARGV[2])
for _, m in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local key = ARGV[1] .. m
  local h = redis.call('HMGET', key, 'fence', 'cached', 'kept', 'mode')
  if h[1] and not is_tail(key) then
    if h[1] == ARGV[2] and h[2] ~= '1' then return 1 end
    if h[3] == '1' and h[4] ~= 'shared' and fence and fence > tonumber(h[1]) then return 1 end
  end
end
return 0
