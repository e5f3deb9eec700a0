-- queue.lua is the queue rule, run by acquire once a claim is compatible with
-- the holders: it may not pass a live entry ahead of its own (ahead of every
-- entry, for a claim with none: a request that does not queue counts as
-- arriving after all of them) that it conflicts with. Entries whose
-- heartbeat ran out (their agent died) are dropped first. For a semaphore,
-- the entries ahead with its limit wait for free slots first.
-- queue_wait(queue, deadlines, own entry, mode, limit, free slots), called
-- only when the queue exists, returns -1 if the claim may be granted, else
-- the ms until the soonest blocking entry's heartbeat runs out (the fallback
-- wake-up: a leaving entry publishes).
local function queue_wait(q, qd, me, mode, limit, free)
  local now = math.floor(now_us() / 1000)
  for _, d in ipairs(redis.call('ZRANGEBYSCORE', qd, '-inf', now)) do
    redis.call('ZREM', q, d)
    redis.call('ZREM', qd, d)
  end
  local wait, ahead = -1, 0
  for _, e in ipairs(redis.call('ZRANGE', q, 0, -1)) do
    if e == me then break end
    local em, el = string.match(e, '|(%a+)|(%d+)$')
    el = tonumber(el) or 1
    local blocks
    if limit > 1 and el == limit then
      ahead = ahead + 1
      blocks = ahead >= free
    else
      blocks = el ~= limit or mode ~= 'shared' or em ~= 'shared'
    end
    if blocks then
      local left = math.max((tonumber(redis.call('ZSCORE', qd, e)) or now) - now, 0)
      if wait < 0 or left < wait then wait = left end
    end
  end
  if redis.call('ZCARD', q) == 0 then redis.call('DEL', q, qd) end
  return wait
end
