-- waiting.lua lists the live waiting records: {instance, "COUNT SINCE", ...}.
-- KEYS: records, deadlines.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {}
for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. now, '+inf')) do
  local v = redis.call('HGET', KEYS[1], m)
  if v then
    out[#out + 1] = m
    out[#out + 1] = v
  end
end
return out
