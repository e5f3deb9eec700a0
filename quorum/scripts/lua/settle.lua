-- settle.lua queues each entry with its settled ticket (the highest a
-- majority gave it), so that every master orders the queue alike, and
-- raises the counter past it, so that an entry made after this one reached
-- a majority gets a later ticket on every master of that majority. An
-- entry that left meanwhile (a tombstone) is not brought back.
-- KEYS: queue, deadlines, ticket counter. ARGV: heartbeat ms, tombstone
-- prefix, then entry and ticket pairs. Returns 1.
local t = redis.call('TIME')
local deadline = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[1])
for i = 3, #ARGV, 2 do
  local m, ticket = ARGV[i], ARGV[i + 1]
  if redis.call('EXISTS', ARGV[2] .. m) == 0 then
    redis.call('ZADD', KEYS[1], ticket, m)
    redis.call('ZADD', KEYS[2], deadline, m)
    if tonumber(redis.call('GET', KEYS[3]) or '0') < tonumber(ticket) then
      redis.call('SET', KEYS[3], ticket)
    end
  end
end
return 1
