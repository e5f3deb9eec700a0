-- delayed.lua returns the master's ms at which the name's last tail ends
-- (0: none). KEYS: set. ARGV: holder key prefix.
local last = 0
for _, m in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local key = ARGV[1] .. m
  if is_tail(key) then
    local ttl = redis.call('PTTL', key)
    if ttl > 0 then last = math.max(last, tail_now() + ttl) end
  end
end
return last
