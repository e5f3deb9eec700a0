-- acquire_lean.lua is acquire.lua for the most common request: a plain
-- exclusive or shared lock (limit 1, slot 0), with no queue entry, no
-- fence block, no tail and no value. It takes acquire.lua's KEYS and the
-- first 13 of its ARGV (the rest are their defaults: acquire.lua reads
-- them so when absent), and answers as acquire.lua does.
--
-- A name that is fresh on this master (no holder set, so no holder; no
-- queue; no tombstone of this attempt) is granted here, with only the
-- calls such a grant needs: one EXISTS that tells which of the name's keys
-- are there, the gate, the fence (without reading a counter known to be
-- missing), and the record (a lock's 6 fields: see record.lua) and the set
-- with their leases. Every other name falls through to acquire.lua's body,
-- which follows this file in the script: nothing here has been written
-- then. The libraries only that body uses (queue.lua, tails.lua) come
-- after this file, so that a fresh name's grant does not make their
-- functions.
--
-- The EXISTS names each key as often as its weight, so that its count
-- reads as a sum of weights (EXISTS counts a key named twice twice): 1
-- the fence counter, 2 the observed mark, 4 each of the set, the queue and
-- the tombstone (any of them: not fresh).
local lean_tomb = KEYS[1] .. ':released:' .. ARGV[1]
local lean_seen = redis.call('EXISTS', KEYS[2], KEYS[7], KEYS[7],
  KEYS[1], KEYS[1], KEYS[1], KEYS[1], KEYS[5], KEYS[5], KEYS[5], KEYS[5], lean_tomb, lean_tomb, lean_tomb, lean_tomb)
if lean_seen < 4 then
  local q, floor = gate(KEYS[4], ARGV[4], ARGV[5])
  if q > 0 then return {-2, q} end
  local fence = take_fences(KEYS[2], floor, 1, lean_seen % 2 == 1)
  local observed = lean_seen % 4 >= 2 -- its record awaits the mark: see acquire.lua
  write_record(KEYS[3], ARGV, string.format('%d', fence), 0, observed and 'pending')
  redis.call('PEXPIRE', KEYS[3], ARGV[2])
  redis.call('SADD', KEYS[1], ARGV[1])
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  if observed then return {1, fence, 0, 1} end
  return {1, fence, 0}
end
