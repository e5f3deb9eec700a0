-- retag.lua makes a live record name its current holder: the fence and
-- who-info of a hold that its agent passed to another local holder (see
-- AcquireRequest.FenceBlock). It never creates a record. It writes no fence
-- counter: the block's end is there since the grant. The fences of a run
-- only grow, so a retag that comes after a later one (Retag does not wait
-- for a slow master before the next) changes nothing. The fence comes from
-- a reserved block, so it is final: it is marked settled, as raise_fence.lua
-- marks a grant's.
-- A new holder is a new leader: if the name is observed (KEYS[2] exists)
-- it publishes leaderMessage on the channel ARGV[8].
-- KEYS: holder key, observed mark. ARGV: fence, agent, pid, uid, owner,
-- since, value, channel.
-- Returns 1 if the record is there.
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if (tonumber(redis.call('HGET', KEYS[1], 'fence')) or 0) > tonumber(ARGV[1]) then return 1 end
redis.call('HSET', KEYS[1], 'fence', ARGV[1], 'settled', ARGV[1], 'agent', ARGV[2], 'pid', ARGV[3], 'uid', ARGV[4], 'owner', ARGV[5], 'since', ARGV[6], 'value', ARGV[7] or '')
if KEYS[2] and redis.call('EXISTS', KEYS[2]) == 1 then redis.call('PUBLISH', ARGV[8], 'leader changed') end
return 1
