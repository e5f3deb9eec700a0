-- release.lua drops HOLDER and wakes waiters anywhere with the message
-- ARGV[3] (the name, or the give-back of a failed round that the agent's own
-- waiters ignore: waking them made them spin). It always leaves a
-- tombstone for tombstone ms, so that nothing brings the hold back: holder
-- ids are one per acquire attempt, and commands can arrive out of order
-- (reconnects, script reloads, deadlines, and the renewal connection), so an
-- acquire of the attempt may land after its release, or a renewal's repair
-- after it.
-- It also drops the hold's revoked record (see revoke.lua), if there is one.
-- KEYS: set, holder key. ARGV: holder, channel, message, tombstone ms.
-- Returns 1 if it held.
local held = math.min(redis.call('DEL', KEYS[2], KEYS[2] .. '!'), 1)
redis.call('SREM', KEYS[1], ARGV[1], ARGV[1] .. '!')
redis.call('SET', KEYS[1] .. ':released:' .. ARGV[1], '1', 'PX', ARGV[4])
if held == 1 then
  redis.call('PUBLISH', ARGV[2], ARGV[3])
end
return held
