-- reserve.lua reserves a further block of fences for a hold its agent
-- passes among local holders (lock cohorting), without a new grant: the
-- hold must still be there, its record and its place in the holder set.
-- KEYS: set, fence, holder key, marker. ARGV: holder, epoch, quarantine ms,
-- block. Returns {1, the block's first fence}, {0} if the hold is not
-- there, or {-2, ms} while the master is quarantined.
local q, floor = gate(KEYS[4], ARGV[2], ARGV[3])
if q > 0 then return {-2, q} end
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 0 or redis.call('EXISTS', KEYS[3]) == 0 then return {0} end
return {1, take_fences(KEYS[2], floor, tonumber(ARGV[4]))}
