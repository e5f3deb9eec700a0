-- bootstrap.lua plants an epoch marker with no quarantine on a master that
-- has none, recording the settings ARGV[2] (may be ""). On a master that
-- has one recording no settings, it records ARGV[2]. Only for masters
-- known to be new: see Bootstrap.
-- KEYS: marker. ARGV: epoch, settings. Returns 1 if planted, 2 if it
-- recorded the settings in a marker there, 0 if it left the marker as it was.
if redis.call('EXISTS', KEYS[1]) == 1 then
  local recorded = redis.call('HGET', KEYS[1], 'settings') or ''
  if recorded ~= '' or ARGV[2] == '' then return 0 end
  redis.call('HSET', KEYS[1], 'settings', ARGV[2])
  return 2
end
redis.call('HSET', KEYS[1], 'epoch', ARGV[1], 'until', '0', 'run', run_id(), 'settings', ARGV[2])
return 1
