-- change.lua records new settings in a master's marker (the settings
-- command: see ChangeSettings), with a quarantine that ends ARGV[3] ms from
-- now (or later, if one ends later already): no agent's vote counts on it
-- meanwhile, so every hold granted under the old settings ends first. A
-- master with no marker gets one, as the gate plants it. The marker is
-- marked how=change: agents whose settings differ do not re-plant it.
-- KEYS: marker. ARGV: epoch (for a master with none), settings, quarantine
-- ms. Returns {1, the settings recorded before ("" if none)}.
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
