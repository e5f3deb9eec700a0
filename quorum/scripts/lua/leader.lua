-- leader.lua is who.lua's list of holders after the fence the master would
-- give the next grant of the name now (as take_fences would: see
-- acquire.lua), as a decimal string. KEYS: set, fence counter, marker.
-- ARGV: holder key prefix.
local cur = redis.call('GET', KEYS[2])
local floor = tonumber(redis.call('HGET', KEYS[3], 'floor') or '0') or 0
local nextf
if cur then
  nextf = math.max(tonumber(cur) + 1, floor)
else
  local t = redis.call('TIME')
  nextf = math.max(tonumber(t[1]) * 1000000, floor)
end
local out = {string.format('%d', nextf)}
