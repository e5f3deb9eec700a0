-- dequeue.lua takes entries out of the name's queue and wakes its waiters
-- anywhere. It leaves a tombstone of each for tombstone ms: an enqueue or
-- settle of the entry still on its way (another connection, a reconnect)
-- must not bring it back to block the queue for a heartbeat.
-- KEYS: queue, deadlines. ARGV: channel, message, tombstone prefix,
-- tombstone ms, then the entries. Returns how many were queued.
local n = 0
for i = 5, #ARGV do
  n = n + redis.call('ZREM', KEYS[1], ARGV[i])
  redis.call('ZREM', KEYS[2], ARGV[i])
  redis.call('SET', ARGV[3] .. ARGV[i], '1', 'PX', ARGV[4])
end
if redis.call('ZCARD', KEYS[1]) == 0 then redis.call('DEL', KEYS[1], KEYS[2]) end
if n > 0 then redis.call('PUBLISH', ARGV[1], ARGV[2]) end
return n
