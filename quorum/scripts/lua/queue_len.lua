-- queue_len.lua counts the live entries of a name's queue. KEYS: deadlines.
local t = redis.call('TIME')
return redis.call('ZCOUNT', KEYS[1], string.format('(%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)), '+inf')
