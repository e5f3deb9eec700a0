-- set_value.lua replaces the value of a live record and says so to the
-- name's observers. KEYS: holder key. ARGV: value, channel.
-- Returns 1 if the record is there, else 0.
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'value', ARGV[1])
redis.call('PUBLISH', ARGV[2], 'leader changed')
return 1
