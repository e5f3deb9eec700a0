-- holders.lua appends the live holders to out and returns it (see who.lua).
for _, m in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local key = ARGV[1] .. m
  if redis.call('EXISTS', key) == 1 and not is_tail(key) then
    table.insert(out, m)
    for _, v in ipairs(redis.call('HMGET', key, 'mode', 'limit', 'slot', 'fence', 'agent', 'pid', 'uid', 'owner', 'since', 'value', 'settled', 'cached')) do
      table.insert(out, v or '')
    end
  end
end
return out
