-- downgrade.lua makes an exclusive hold shared and wakes waiters (readers
-- may now be granted). KEYS: holder key. ARGV: channel, name.
-- Returns 1 if the hold is there.
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'mode', 'shared')
redis.call('PUBLISH', ARGV[1], ARGV[2])
return 1
