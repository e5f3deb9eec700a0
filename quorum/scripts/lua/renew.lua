-- renew.lua sets the lease of many holds at once: one script call per batch
-- keeps the watchdog's cost per hold small. Used by the watchdog and EXTEND.
-- A queue entry's heartbeat rides in the same batch: its keys are the queue
-- and its deadlines, its holder id the entry, and its lease "q" and the ms;
-- it is renewed only while the entry is queued (never re-added: it may have
-- left meanwhile). A hold with a tail has the lease "t" and the ms (see
-- tails.lua); other holds pay nothing for tails. An agent's waiting record
-- rides it too (see quorum/waiters.go): its keys are the deadlines and the records,
-- its holder id the agent's instance, its lease "w" and the ms; renewed only
-- while it is there and its deadline has not passed (a lapsed one is gone),
-- and both keys live at least as long.
-- KEYS: marker, then for each hold its set key, and for a queue entry or
-- a waiting record its second key (a hold's holder key is its set key,
-- ":h:" and its holder id: sent, it was ~45% of a renewal's bytes). ARGV:
-- epoch, quarantine ms, then each hold's holder id and lease ms.
-- Returns {0, r1, r2, ...} with 1 where the hold was renewed and 0 where it is
-- gone, or {-2, ms} while the master is quarantined.
local q = gate(KEYS[1], ARGV[1], ARGV[2])
if q > 0 then return {-2, q} end
local out = {0}
local now
local k = 2
for i = 3, #ARGV, 2 do
  local set, key, lease = KEYS[k], nil, ARGV[i + 1]
  local kind = string.sub(lease, 1, 1)
  if kind == 'q' or kind == 'w' then
    key, k = KEYS[k + 1], k + 2
  else
    key, k = set .. ':h:' .. ARGV[i], k + 1
  end
  if kind == 'q' then
    if redis.call('ZSCORE', set, ARGV[i]) then
      now = now or math.floor(now_us() / 1000)
      redis.call('ZADD', key, 'XX', now + tonumber(string.sub(lease, 2)), ARGV[i])
      out[#out + 1] = 1
    else
      out[#out + 1] = 0
    end
  elseif kind == 't' then
    now = now or math.floor(now_us() / 1000)
    out[#out + 1] = tail_renew(KEYS[1], set, key, ARGV[i], tonumber(string.sub(lease, 2)), now)
  elseif kind == 'w' then
    now = now or math.floor(now_us() / 1000)
    if (tonumber(redis.call('ZSCORE', set, ARGV[i])) or 0) > now then
      local ms = tonumber(string.sub(lease, 2))
      redis.call('ZADD', set, 'XX', now + ms, ARGV[i])
      for _, each in ipairs({set, key}) do
        if redis.call('PTTL', each) < ms then redis.call('PEXPIRE', each, ms) end
      end
      out[#out + 1] = 1
    else
      out[#out + 1] = 0
    end
  elseif redis.call('PEXPIRE', key, lease) == 1 then
    redis.call('SADD', set, ARGV[i])
    if redis.call('PTTL', set) < tonumber(lease) then redis.call('PEXPIRE', set, lease) end
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return out
