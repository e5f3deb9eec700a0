-- horizon.lua returns a master's tail horizon: {epoch, 1 if its marker is
-- missing or pending (it lost its data and knows nothing of the tails it
-- had), ms until both its tails and its quarantine have ended}.
-- KEYS: marker.
local m = redis.call('HMGET', KEYS[1], 'epoch', 'tails', 'until', 'tail_until')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lost = 0
if not m[1] or m[2] == 'pending' then lost = 1 end
local left = math.max((tonumber(m[3]) or 0) - now, (tonumber(m[4]) or 0) - now, 0)
return {m[1] or '', lost, left}
