-- cache_or_release.lua ends a hold's record as its last local holder let
-- go: if no other agent waits for the name (an acquire found the record
-- in its way and marked it wanted, a live waiting record of another
-- instance, or any queue entry) and none observes it (the observed mark:
-- a cache's lendings reach the masters, and so observers on other agents,
-- only at its agent's next note, and an observer is owed every change at
-- once), the record is kept and marked cached (as cached.lua); else it is
-- released (as release.lua).
-- KEYS: set, holder key, waiting records, their deadlines, queue, observed mark.
-- ARGV: holder, channel, message, tombstone ms (as release.lua), instance.
-- Returns 2 if kept, 3 if no other agent waits but the record is not
-- there (the grant missed this master: the watchdog may bring it back),
-- else release.lua's answer.
local others = redis.call('HGET', KEYS[2], 'wanted') == '1' or redis.call('ZCARD', KEYS[5]) > 0 or
  redis.call('EXISTS', KEYS[6]) == 1
if not others then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], '(' .. now, '+inf')) do
    if m ~= ARGV[5] then others = true break end
  end
end
if not others then
  if redis.call('EXISTS', KEYS[2]) == 0 then return 3 end
  redis.call('HSET', KEYS[2], 'cached', '1', 'kept', '1')
  redis.call('PUBLISH', ARGV[2], 'cached')
  return 2
end
