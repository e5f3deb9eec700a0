-- tails.lua is how a hold outlives itself on a master: a tail is the
-- holder's record kept after the hold ended, blocking every claim until it
-- expires. A hold with a Tail is granted with the record's fields
--
--	until      the master's ms at which the hold's own lease ends (each
--	           renewal moves it)
--	delay      the Delay, in ms
--	min_until  the master's ms at grant + MinHold
--
-- and PX = max(lease + delay, min_until − now), renewed the same way (a
-- renewal never shortens it). A record whose until is past is a tail: the
-- hold is over (its agent stopped renewing it: it died, or lost its
-- masters) and only its delay or min_hold remains; acquire.lua counts it as
-- blocking every claim, with its PTTL as the wait. An end of the hold that
-- its agent makes (end.lua) turns the record into a tail at once, with PX
-- the delay (an unclean end) or what is left of min_hold, whichever is
-- longer. The record is then renamed to HOLDER! (key and set member), as a
-- revoked one is (see revoke.lua): the renewal of HOLDER finds nothing,
-- so a renewal on its way cannot bring the hold back.
-- All times are each master's own clock: skewed agent clocks do not matter.
-- Each script that sets a tail's PX also raises the master's tail horizon
-- (tail_mark; see the tail horizon in quorum/gate.go), so that a master that loses its data sits
-- out the tails it forgot.
--
-- A record that a renewal's repair re-created on a master that lacked it
-- (repair.lua) has no tail fields: its first renewal gives it an until and
-- no delay or min_hold, which only that master (a minority) then lacks.
local tail_clock
local function tail_now()
  if not tail_clock then
    local t = redis.call('TIME')
    tail_clock = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return tail_clock
end
local function is_tail(key)
  local u = redis.call('HGET', key, 'until')
  return u and tonumber(u) <= tail_now()
end
local function tail_mark(marker, px)
  local m = redis.call('HMGET', marker, 'epoch', 'tail_until')
  local last = tail_now() + px
  if m[1] and (tonumber(m[2]) or 0) < last then
    redis.call('HSET', marker, 'tail_until', string.format('%d', last))
  end
end
local function tail_grant(marker, key, lease, delay, minh)
  if delay <= 0 and minh <= 0 then return lease end
  local now = tail_now()
  redis.call('HSET', key, 'until', string.format('%d', now + lease), 'delay', string.format('%d', delay),
    'min_until', string.format('%d', now + minh))
  local px = math.max(lease + delay, minh)
  tail_mark(marker, px)
  return px
end
local function tail_renew(marker, set, key, holder, lease, now)
  local h = redis.call('HMGET', key, 'delay', 'min_until', 'until')
  if h[3] and tonumber(h[3]) <= now then return 0 end -- a tail: the hold is over here
  if not h[3] and redis.call('EXISTS', key) == 0 then return 0 end
  local px = math.max(lease + (tonumber(h[1]) or 0), (tonumber(h[2]) or 0) - now)
  redis.call('HSET', key, 'until', string.format('%d', now + lease))
  redis.call('PEXPIRE', key, px)
  redis.call('SADD', set, holder)
  if redis.call('PTTL', set) < px then redis.call('PEXPIRE', set, px) end
  tail_mark(marker, px)
  return 1
end
