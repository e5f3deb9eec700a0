-- fences.lua takes fences from a name's counter (see acquire.lua):
-- take_fences(counter key, the gate's floor, B, there) reserves B fences
-- and returns the first; the counter is left at the last. there is false
-- when the caller already knows the counter is missing (see
-- acquire_lean.lua), which spares reading it; nil when it does not know.
local function take_fences(key, floor, block, there)
  local cur = there ~= false and redis.call('GET', key)
  local fence
  if cur then fence = math.max(tonumber(cur) + 1, floor) else fence = math.max(math.floor(now_us() / 1000000) * 1000000, floor) end
  redis.call('SET', key, string.format('%d', fence + block - 1))
  return fence
end
