-- batch.lua is a template (the registry fills it in with fmt.Sprintf: see
-- batch in quorum/scripts/scripts.go), not a script of its own: it runs a script's body
-- (%[3]s, as the function one(KEYS, ARGV)) once per item of a batch: the
-- KEYS and ARGV of the script are the items' own, %[1]d and %[2]d of each,
-- one after the other, and the reply is the items' replies in order. One
-- call of the master serves many rounds at once (see quorum/master.go, batcher). Each item
-- runs under pcall, so that an item that fails (a key of the wrong type,
-- say) fails alone, as it would in a call of its own.
local function one(KEYS, ARGV)
%[3]s
end

local out = {}
for i = 0, #KEYS / %[1]d - 1 do
  local ok, r = pcall(one, {unpack(KEYS, i * %[1]d + 1, i * %[1]d + %[1]d)}, {unpack(ARGV, i * %[2]d + 1, i * %[2]d + %[2]d)})
  if ok then
    out[#out + 1] = r
  elseif type(r) == 'table' and r.err then
    out[#out + 1] = redis.error_reply(r.err)
  else
    out[#out + 1] = redis.error_reply(tostring(r))
  end
end
return out
