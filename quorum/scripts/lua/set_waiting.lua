-- set_waiting.lua writes (COUNT > 0) or removes (COUNT 0) one agent's
-- waiting record, dropping records whose deadline passed.
-- KEYS: records, deadlines. ARGV: instance, count, since, heartbeat ms.
-- Returns 1.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)) do
  redis.call('HDEL', KEYS[1], m)
  redis.call('ZREM', KEYS[2], m)
end
if tonumber(ARGV[2]) > 0 then
  local ms = tonumber(ARGV[4])
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2] .. ' ' .. ARGV[3])
  redis.call('ZADD', KEYS[2], now + ms, ARGV[1])
  for _, k in ipairs(KEYS) do
    if redis.call('PTTL', k) < ms then redis.call('PEXPIRE', k, ms) end
  end
else
  redis.call('HDEL', KEYS[1], ARGV[1])
  redis.call('ZREM', KEYS[2], ARGV[1])
end
return 1
