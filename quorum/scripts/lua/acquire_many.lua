-- acquire_many.lua is acquire.lua over a batch of claims (7 keys and 18
-- arguments each, as acquire.lua takes them). The masters' gate runs once,
-- for the first item: every item carries the same marker.
-- This file is the batch's prelude, which lets the gate run once; the
-- registry puts acquire.lua, as each item's body, in batch.lua after it.
local gate_once, gated = gate, nil
local function gate(marker, epoch, quarantine)
  if not gated then gated = {gate_once(marker, epoch, quarantine)} end
  return gated[1], gated[2]
end
