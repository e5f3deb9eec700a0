-- record.lua writes a holder's record (see acquire.lua): write_record(key,
-- argv, fence, slot, settled) sets the fence and the who-info (argv is
-- acquire.lua's ARGV: argv[9..13], agent, pid, uid, owner, since; given,
-- not read from ARGV, as a batch's item has its own), and a field only
-- some kinds use only when it is not its default, which every script that
-- reads a record assumes when it is missing: mode (exclusive) only when
-- shared, limit (1) and slot (0) only for a semaphore, value ('') only
-- when there is one, settled only when given (see awaitingAgent). A
-- lock's record is then 6 fields, not 10.
local function write_record(key, argv, fence, slot, settled)
  local f = {'fence', fence, 'agent', argv[9], 'pid', argv[10], 'uid', argv[11], 'owner', argv[12], 'since', argv[13]}
  local function add(field, v)
    f[#f + 1] = field
    f[#f + 1] = v
  end
  if argv[6] == 'shared' then add('mode', 'shared') end
  if (tonumber(argv[7]) or 1) > 1 then
    add('limit', argv[7])
    add('slot', string.format('%d', slot))
  end
  if argv[18] and argv[18] ~= '' then add('value', argv[18]) end
  if settled then add('settled', settled) end
  redis.call('HSET', key, unpack(f))
end
