-- enqueue.lua gives each entry a ticket from the master's counter, which
-- counts like a fence (a hybrid clock: at least the master's time in whole
-- seconds, in µs), so that masters roughly agree. It writes no entry: an
-- entry is queued only by settle.lua, with the highest ticket a majority
-- gave, so that no master orders a queue by a ticket that may still change
-- (a LOCK that a master met before the settled ticket of an entry ahead of
-- it could otherwise be ordered before that entry there). An entry already
-- queued keeps its ticket; one that left (a tombstone) gets none (0).
-- KEYS: queue, ticket counter, marker. ARGV: epoch, quarantine ms,
-- tombstone prefix, then the entries in arrival order.
-- Returns {0, ticket...}, or {-2, ms} while quarantined.
local q = gate(KEYS[3], ARGV[1], ARGV[2])
if q > 0 then return {-2, q} end
local base = math.floor(now_us() / 1000000) * 1000000
local out = {0}
for i = 4, #ARGV do
  local m, t = ARGV[i], 0
  if redis.call('EXISTS', ARGV[3] .. m) == 0 then
    local s = redis.call('ZSCORE', KEYS[1], m)
    if s then
      t = tonumber(s)
    else
      t = math.max(tonumber(redis.call('GET', KEYS[2]) or '0') + 1, base)
      redis.call('SET', KEYS[2], string.format('%d', t))
    end
  end
  out[#out + 1] = t
end
return out
