-- cache_note.lua writes what a caching agent's lendings changed of a
-- cached record since its last note (see NoteCaches): its current holder's
-- fence and who-info, as retag.lua does (never a lower fence than the
-- record carries; the fence is final, so it is marked settled), and its
-- cached mark, as cached.lua does (marked cached, it says so on the name's
-- channel), unless the record is no cache's any more (kept dropped: see
-- Unkeep): a note still on its way when the cache became a run must not
-- mark the run's record cached. A new holder, or a record no longer
-- cached, is a new leader:
-- if the name is observed (KEYS[2] exists) it publishes leaderMessage. It
-- never creates a record.
-- KEYS: holder key, observed mark. ARGV: fence, agent, pid, uid, owner,
-- since, value, channel, "1" (cached) or "0".
-- Returns 0 if the record is not there, 2 if it is and an acquire found it
-- in its way (it is marked wanted: see acquire.lua) or the name is
-- observed (its agent gives the cache up, as for a waiter: observers are
-- owed every change at once, and a cache tells the masters only at its
-- next note), else 1.
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local h = redis.call('HMGET', KEYS[1], 'fence', 'cached', 'wanted', 'kept')
local leader = false
if (tonumber(h[1]) or 0) < tonumber(ARGV[1]) then
  redis.call('HSET', KEYS[1], 'fence', ARGV[1], 'settled', ARGV[1], 'agent', ARGV[2], 'pid', ARGV[3], 'uid', ARGV[4], 'owner', ARGV[5], 'since', ARGV[6], 'value', ARGV[7])
  leader = true
end
if h[4] == '1' and (h[2] or '0') ~= ARGV[9] then
  redis.call('HSET', KEYS[1], 'cached', ARGV[9])
  if ARGV[9] == '1' then
    redis.call('PUBLISH', ARGV[8], 'cached')
  else
    leader = true
  end
end
local observed = redis.call('EXISTS', KEYS[2]) == 1
if leader and observed then redis.call('PUBLISH', ARGV[8], 'leader changed') end
if h[3] == '1' or observed then return 2 end
return 1
