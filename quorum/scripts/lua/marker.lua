-- marker.lua is the health probe: it runs the gate (planting a quarantined
-- marker on a master that has none, when the agent may) and returns
-- {epoch, ms of quarantine left, run_id, recorded settings, refusal, how},
-- how being how the marker came to be ("plant": on a master that had none;
-- "restart": over another server's; "change": the settings command; "": a
-- bootstrap, or a marker older than how), and where
-- refusal is "" when the master may vote (after its quarantine), else the
-- gate's refusal ("SETTINGS ...", "UNPLANTED", or an error of the master's),
-- or "REPLANTED <old settings>". With ARGV[3] "1" (the agent knows that a
-- majority records its settings: see Cluster.replant), a marker recording
-- other settings is planted anew with the agent's, as a master that lost
-- its data is (new epoch, full quarantine: whatever it holds was granted
-- under other settings), so that the cluster heals; not one that the
-- settings command wrote (how=change): that is the cluster's new setting,
-- which an agent that still runs with the old one must not undo.
-- KEYS: marker. ARGV: epoch argument, gate argument, replant.
local ok, q = pcall(gate, KEYS[1], ARGV[1], ARGV[2])
local refusal = ''
if not ok then
  refusal = (type(q) == 'table' and q.err) or tostring(q)
  q = 0
  local old = redis.call('HGET', KEYS[1], 'settings') or ''
  if ARGV[3] == '1' and string.sub(refusal, 1, 9) == 'SETTINGS ' and redis.call('HGET', KEYS[1], 'how') ~= 'change' then
    local quarantine, _, settings = gate_args(ARGV[2])
    q = plant(KEYS[1], string.match(ARGV[1], '^(.-);') or ARGV[1], quarantine, settings, run_id(), 'plant')
    refusal = 'REPLANTED ' .. old
  end
end
local h = redis.call('HMGET', KEYS[1], 'epoch', 'run', 'settings', 'how')
return {h[1] or '', q, h[2] or '', h[3] or '', refusal, h[4] or ''}
