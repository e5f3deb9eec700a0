-- revoked_live.lua says, of each revoked record given, whether it is still a
-- hold: there and not a tail. KEYS: the revoked records. Returns 1 or 0 each.
local out = {}
for i, key in ipairs(KEYS) do
  out[i] = 0
  if redis.call('EXISTS', key) == 1 and not is_tail(key) then out[i] = 1 end
end
return out
