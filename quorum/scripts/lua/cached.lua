-- cached.lua marks a live record cached or not. Marked cached, it says so
-- on the name's channel (cachedMessage); unmarked, to the name's observers
-- only (a cached record leads nothing). It never creates a record.
-- With a third argument "unkept" it also drops the kept field: the record
-- is no cache's any more (see Unkeep).
-- KEYS: holder key, observed mark. ARGV: "1" or "0", channel, ["unkept"].
-- Returns 0 if the record is not there, 2 if it is and an acquire found it
-- in its way (it is marked wanted: see acquire.lua), else 1.
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if ARGV[3] == 'unkept' then redis.call('HDEL', KEYS[1], 'kept') end
local done = 1
if redis.call('HGET', KEYS[1], 'wanted') == '1' then done = 2 end
if (redis.call('HGET', KEYS[1], 'cached') or '0') == ARGV[1] then return done end
redis.call('HSET', KEYS[1], 'cached', ARGV[1])
if ARGV[1] == '1' then
  redis.call('PUBLISH', ARGV[2], 'cached')
elseif KEYS[2] and redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('PUBLISH', ARGV[2], 'leader changed')
end
return done
