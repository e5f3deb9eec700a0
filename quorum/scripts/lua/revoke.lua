-- revoke.lua revokes the live holds of a name (those of one agent, if
-- ARGV[2] is not ""): each record is renamed to HOLDER! with its PTTL, and
-- its set member with it. The revoked record still blocks what the hold
-- blocked, until its agent ends it (end.lua or release.lua, after telling
-- its client) or it expires; but nothing can renew it (the renewal of
-- HOLDER finds no record: the hold is lost on this master) or re-create it
-- (a tombstone, as a release leaves). A tail is not a hold: it is left.
-- KEYS: set. ARGV: holder key prefix, agent ("" for any), tombstone ms.
-- Returns the holders revoked.
local out = {}
for _, m in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local key = ARGV[1] .. m
  if string.sub(m, -1) ~= '!' and not is_tail(key) then
    local agent = redis.call('HGET', key, 'agent')
    if agent and (ARGV[2] == '' or agent == ARGV[2]) then
      redis.call('RENAME', key, key .. '!')
      redis.call('SREM', KEYS[1], m)
      redis.call('SADD', KEYS[1], m .. '!')
      redis.call('SET', KEYS[1] .. ':released:' .. m, '1', 'PX', ARGV[3])
      out[#out + 1] = m
    end
  end
end
return out
