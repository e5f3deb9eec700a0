-- settle_tails.lua lengthens the quarantine of a pending marker of epoch ARGV[1]
-- to ARGV[2] ms from now (never shortens it; it starts one again if it was
-- over), and clears pending. KEYS: marker. Returns the ms of quarantine
-- left, or -1 if the marker is another or settled already.
local m = redis.call('HMGET', KEYS[1], 'epoch', 'until', 'tails')
if m[1] ~= ARGV[1] or m[3] ~= 'pending' then return -1 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ends = math.max(tonumber(m[2]) or 0, now + tonumber(ARGV[2]))
redis.call('HSET', KEYS[1], 'until', string.format('%d', ends))
redis.call('HDEL', KEYS[1], 'tails')
return ends - now
