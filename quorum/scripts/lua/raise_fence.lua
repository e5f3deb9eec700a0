-- raise_fence.lua raises the fence counter to at least ARGV[2], the last
-- fence of the grant's block, and, if the holder's record is given and
-- exists, makes it carry the grant's fence ARGV[1], unless it carries a
-- later one that is settled: a hand-over's retag, which may land before a
-- write-back sent earlier (a later one not settled is the master's own,
-- from a grant it ran late, which the grant's fence replaces). With
-- ARGV[4] "1" it also marks that fence settled (the field settled: only
-- the granting agent sends it, once the grant stood, so a reader of the
-- record knows the term's fence without waiting for the masters that
-- refused the grant: see markSettled, Cluster.Leader). A
-- record written on an observed name (KEYS[3] exists) publishes
-- leaderMessage on the channel ARGV[3], so that observers read again.
-- KEYS: fence, holder key (optional), observed mark (with the holder key).
-- ARGV: fence, block end, and with the holder key: channel, mark.
-- Returns the counter after.
local rec = KEYS[2] and redis.call('HMGET', KEYS[2], 'fence', 'settled')
if rec and rec[1] and (tonumber(rec[1]) <= tonumber(ARGV[1]) or rec[1] ~= rec[2]) then
  redis.call('HSET', KEYS[2], 'fence', ARGV[1])
  if ARGV[4] == '1' then redis.call('HSET', KEYS[2], 'settled', ARGV[1]) end
  if redis.call('EXISTS', KEYS[3]) == 1 then redis.call('PUBLISH', ARGV[3], 'leader changed') end
end
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local want = math.max(tonumber(ARGV[1]), tonumber(ARGV[2]))
if cur < want then
  redis.call('SET', KEYS[1], string.format('%d', want))
  return want
end
return cur
