-- gate.lua is the first thing every script that votes runs: it refuses the
-- vote of a master that lost its data, or that records other settings. The
-- epoch marker is planted once; a master that restarted empty or was
-- flushed has none, and one that restarted from a snapshot (RDB, an AOF not
-- fsynced always, a backup) or had its data replaced (REPLICAOF) has one
-- that another server process left (the marker records the run_id), so its
-- data may be stale: the first script to meet it plants a new one whose
-- quarantine ends ARGV-given ms later on the master's own clock. Every
-- agent, including one started during the quarantine, reads the same end
-- from the master, and no vote of an emptied master counts until every hold
-- it may have forgotten has ended.
--
-- The marker also records the cluster's settings (see Settings), checked on
-- every vote: a master whose marker records other settings than the
-- agent's refuses with the error reply "SETTINGS <recorded>", so that no
-- agent counts the vote of a master planted with another lease or
-- quarantine (a late agent with a shorter quarantine would otherwise make
-- an emptied master vote again before the holds it forgot had ended). A
-- marker that records none (planted before settings were recorded, or by
-- an older bootstrap) votes as it did, and adopts the agent's settings. An
-- agent plants or adopts only when it may (see Cluster.mayPlant): otherwise
-- a master with no marker refuses with "UNPLANTED", and does not vote until
-- an agent that may plants one; one whose marker records none votes
-- without adopting.
--
-- gate(marker, epoch argument, gate argument) returns the ms of quarantine
-- left (0: may vote) and the marker's fence floor (see acquire.lua). The
-- epoch argument is "EPOCH;RUN" (RUN: the run_id the agent verified), the
-- gate argument "QUARANTINE_MS MAY_PLANT SETTINGS" (MAY_PLANT 1 or 0; see
-- Cluster.gateArgs, which builds both).
--
-- A marker the gate plants says tails=pending: the probe then lengthens its
-- quarantine to the tails the other masters keep (see the tail horizon in quorum/gate.go).
--
-- The gate runs before every vote, so it is kept to one call in the common
-- case: once a quarantine is found over, its end is written as 0 (it never
-- starts again: a new one comes with a new marker), and later gates need not
-- read the clock.
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function run_id()
  local info = redis.pcall('INFO', 'server')
  if type(info) ~= 'string' then return '' end
  return string.match(info, 'run_id:(%x+)') or ''
end
local CHECK_RUN = true
local function plant(marker, epoch, quarantine, settings, run, how)
  local now = math.floor(now_us() / 1000)
  local floor = (math.floor(now / 1000) + 1) * 1000000
  redis.call('HSET', marker, 'epoch', epoch, 'until', string.format('%d', now + quarantine),
    'floor', string.format('%d', floor), 'run', run, 'settings', settings, 'how', how, 'tails', 'pending')
  return quarantine, floor
end
local function gate_args(gatearg)
  local quarantine, may_plant, settings = string.match(gatearg, '^(%d+) (%d) (.*)$')
  return tonumber(quarantine) or 0, may_plant == '1', settings or ''
end
local function gate(marker, epocharg, gatearg)
  local epoch, expected = string.match(epocharg, '^(.-);(.*)$')
  if not epoch then epoch, expected = epocharg, '' end
  local quarantine, may_plant, settings = gate_args(gatearg)
  local m = redis.call('HMGET', marker, 'epoch', 'until', 'floor', 'run', 'settings')
  local known = m[4] and m[4] ~= ''
  local run = ''
  if CHECK_RUN then run = run_id() end
  if not m[1] or (known and run ~= '' and m[4] ~= run) then
    if not may_plant then error({err = 'UNPLANTED'}) end
    local how = 'plant' -- it had none: new, or emptied (restarted empty, flushed)
    if m[1] then how = 'restart' end -- another server process's: restored, replaced
    return plant(marker, epoch, quarantine, settings, run, how)
  end
  local recorded = m[5] or ''
  if recorded ~= settings then
    if recorded ~= '' then error({err = 'SETTINGS ' .. recorded}) end
    if may_plant then redis.call('HSET', marker, 'settings', settings) end
  end
  if m[2] ~= '0' then
    local left = (tonumber(m[2]) or 0) - math.floor(now_us() / 1000)
    if left > 0 then return left, tonumber(m[3]) or 0 end
    redis.call('HSET', marker, 'until', '0')
  end
  if not CHECK_RUN and known and expected ~= '' and m[4] ~= expected then
    return 1, 0 -- another server's marker, or the agent's view is old: no vote until a probe looks
  end
  if not known and run ~= '' then redis.call('HSET', marker, 'run', run) end
  return 0, tonumber(m[3]) or 0
end
