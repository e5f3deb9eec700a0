package quorum

import (
	"crypto/sha1"
	"encoding/hex"
)

// A name's keys on one master all share the hash tag {name}:
//
//	P{name}            set of holder ids that may hold the name
//	P{name}:h:HOLDER   one per holder; value = who-info and fence; PX = its lease
//	P{name}:fence      the fence counter; never expires
//	P{name}:released:HOLDER  tombstone of a release that found no key (see releaseSrc)
//	Pepoch             the master's epoch marker: a hash {epoch, until}
//
// The set expires no sooner than any member's holder key, so a live holder
// key is always listed. A listed member whose holder key is gone is stale and
// is dropped by the next acquire.
//
// Scripts touch the epoch marker beside a name's keys, so each master must be
// a standalone Redis (not a Redis Cluster).

// gateLua is the first thing every script that votes runs: it refuses the
// vote of a master that lost its data. The epoch marker is planted once; a
// master that restarted empty or was flushed has none, so the first script
// to meet it plants a new one whose quarantine ends ARGV-given ms later on
// the master's own clock. Every agent, including one started during the
// quarantine, reads the same end from the master, and no vote of an emptied
// master counts until every hold it may have forgotten has ended.
// gate(marker, epoch, quarantine ms) returns the ms of quarantine left (0:
// may vote) and the marker's fence floor (see acquireSrc).
const gateLua = `
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function gate(marker, epoch, quarantine)
  local now = math.floor(now_us() / 1000)
  local m = redis.call('HMGET', marker, 'epoch', 'until', 'floor')
  if not m[1] then
    local floor = (math.floor(now / 1000) + 1) * 1000000
    redis.call('HSET', marker, 'epoch', epoch, 'until', string.format('%d', now + quarantine), 'floor', string.format('%d', floor))
    return quarantine, floor
  end
  local left = (tonumber(m[2]) or 0) - now
  if left < 0 then left = 0 end
  return left, tonumber(m[3]) or 0
end
`

// acquireSrc grants HOLDER if no other live holder is listed and HOLDER's
// attempt was not already released (a tombstone: see releaseSrc).
// KEYS: set, fence, holder key, marker. ARGV: holder, lease ms, info, holder
// key prefix, epoch, quarantine ms.
// Returns {1, fence} on grant, {0, ms until the longest other holder's lease
// ends} when held, {0, -1} when the attempt was released before it arrived,
// {-2, ms} while the master is quarantined.
//
// The fence counter is a hybrid clock: a counter that is missing (a new name,
// or a master that lost its data) starts at the master's time, in whole
// seconds counted in µs (so that masters agree on a new name's first fence
// and no write-back is needed), and at least at the marker's floor: the
// whole second after the master was found empty. Each grant adds one, and a
// grant takes far more than a µs, so a fence never repeats or goes back even
// when every master lost its counters, as long as master clocks do not step
// back and differ by less than the quarantine.
const acquireSrc = gateLua + `
local q, floor = gate(KEYS[4], ARGV[5], tonumber(ARGV[6]))
if q > 0 then return {-2, q} end
if redis.call('EXISTS', KEYS[1] .. ':released:' .. ARGV[1]) == 1 then return {0, -1} end
local wait = -1
for _, m in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if m ~= ARGV[1] then
    local ttl = redis.call('PTTL', ARGV[4] .. m)
    if ttl == -2 then
      redis.call('SREM', KEYS[1], m)
    elseif ttl > wait then
      wait = ttl
    elseif wait < 0 then
      wait = 0
    end
  end
end
if wait >= 0 then return {0, wait} end
local cur = redis.call('GET', KEYS[2])
local fence
if cur then fence = tonumber(cur) + 1 else fence = math.max(math.floor(now_us() / 1000000) * 1000000, floor) end
fence = string.format('%d', fence)
redis.call('SET', KEYS[2], fence)
redis.call('SET', KEYS[3], ARGV[3] .. ' fence=' .. fence, 'PX', ARGV[2])
redis.call('SADD', KEYS[1], ARGV[1])
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return {1, tonumber(fence)}
`

// renewSrc sets the lease of many holds at once: one script call per batch
// keeps the watchdog's cost per hold small. Used by the watchdog and EXTEND.
// KEYS: marker, then set and holder key of each hold. ARGV: lease ms, epoch,
// quarantine ms, then each hold's holder id.
// Returns {0, r1, r2, ...} with 1 where the hold was renewed and 0 where it is
// gone, or {-2, ms} while the master is quarantined.
const renewSrc = gateLua + `
local q = gate(KEYS[1], ARGV[2], tonumber(ARGV[3]))
if q > 0 then return {-2, q} end
local lease = tonumber(ARGV[1])
local out = {0}
for i = 4, #ARGV do
  local set, key = KEYS[2 * (i - 4) + 2], KEYS[2 * (i - 4) + 3]
  if redis.call('PEXPIRE', key, ARGV[1]) == 1 then
    redis.call('SADD', set, ARGV[i])
    if redis.call('PTTL', set) < lease then redis.call('PEXPIRE', set, ARGV[1]) end
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return out
`

// repairSrc re-creates a hold that a majority still has on a master that
// lacks it (it was down at the grant, or expired the key while paused), so
// the hold regains its full redundancy. It never takes the name from
// another holder, never undoes a release, and raises the fence counter to
// the hold's fence. KEYS: set, fence, holder key, marker. ARGV: holder,
// lease ms, record, holder key prefix, epoch, quarantine ms, fence.
// Returns 2 if re-created, 1 if it was there, 0 if it may not be, -2 while quarantined.
const repairSrc = gateLua + `
local q = gate(KEYS[4], ARGV[5], tonumber(ARGV[6]))
if q > 0 then return -2 end
if redis.call('PEXPIRE', KEYS[3], ARGV[2]) == 1 then return 1 end
if redis.call('EXISTS', KEYS[1] .. ':released:' .. ARGV[1]) == 1 then return 0 end
for _, m in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if m ~= ARGV[1] then
    if redis.call('PTTL', ARGV[4] .. m) ~= -2 then return 0 end
    redis.call('SREM', KEYS[1], m)
  end
end
redis.call('SET', KEYS[3], ARGV[3], 'PX', ARGV[2])
redis.call('SADD', KEYS[1], ARGV[1])
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
if tonumber(redis.call('GET', KEYS[2]) or '0') < tonumber(ARGV[7]) then
  redis.call('SET', KEYS[2], ARGV[7])
end
return 2
`

// releaseSrc drops HOLDER and wakes waiters anywhere with the message
// ARGV[3] (the name, or the give-back of a failed round that the agent's own
// waiters ignore: waking them made them spin). Holder ids are one per
// acquire attempt, so a release that finds no key arrived before (or instead
// of) its attempt's acquire: commands to one master can be reordered by
// reconnects, script reloads and deadlines. It then leaves a tombstone for
// tombstone ms so that a late acquire of that attempt is refused instead of
// orphaning a key for a whole lease.
// KEYS: set, holder key. ARGV: holder, channel, message, tombstone ms.
// Returns 1 if it held.
const releaseSrc = `
local held = redis.call('DEL', KEYS[2])
redis.call('SREM', KEYS[1], ARGV[1])
if held == 1 then
  redis.call('PUBLISH', ARGV[2], ARGV[3])
else
  redis.call('SET', KEYS[1] .. ':released:' .. ARGV[1], '1', 'PX', ARGV[4])
end
return held
`

// raiseFenceSrc raises the fence counter to at least ARGV[1] and, if the
// holder key exists, makes its record (ARGV[2]) carry the settled fence.
// KEYS: fence, holder key. Returns the counter after.
const raiseFenceSrc = `
if ARGV[2] ~= '' then redis.call('SET', KEYS[2], ARGV[2], 'XX', 'KEEPTTL') end
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local want = tonumber(ARGV[1])
if cur < want then
  redis.call('SET', KEYS[1], ARGV[1])
  return want
end
return cur
`

// whoSrc lists the live holders: {holder, info, pttl, ...}. KEYS: set. ARGV: holder key prefix.
const whoSrc = `
local out = {}
for _, m in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local info = redis.call('GET', ARGV[1] .. m)
  if info then
    table.insert(out, m)
    table.insert(out, info)
    table.insert(out, redis.call('PTTL', ARGV[1] .. m))
  end
end
return out
`

// markerSrc is the health probe: it runs the gate (planting a quarantined
// marker on a master that has none) and returns {epoch, ms of quarantine left}.
// KEYS: marker. ARGV: epoch, quarantine ms.
const markerSrc = gateLua + `
local q = gate(KEYS[1], ARGV[1], tonumber(ARGV[2]))
return {redis.call('HGET', KEYS[1], 'epoch'), q}
`

// bootstrapSrc plants an epoch marker with no quarantine on a master that
// has none. Only for masters known to be new: see Bootstrap.
// KEYS: marker. ARGV: epoch. Returns 1 if planted.
const bootstrapSrc = `
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'epoch', ARGV[1], 'until', '0')
return 1
`

// script is a Lua script with its SHA1, run by EVALSHA with an EVAL fallback.
type script struct {
	src, sha string
}

func newScript(src string) *script {
	sum := sha1.Sum([]byte(src))
	return &script{src: src, sha: hex.EncodeToString(sum[:])}
}

// allScripts are loaded into a master when it connects or loses its data.
var allScripts = []*script{acquireScript, renewScript, repairScript, releaseScript, raiseFenceScript, whoScript, markerScript}

var (
	acquireScript    = newScript(acquireSrc)
	renewScript      = newScript(renewSrc)
	repairScript     = newScript(repairSrc)
	releaseScript    = newScript(releaseSrc)
	raiseFenceScript = newScript(raiseFenceSrc)
	whoScript        = newScript(whoSrc)
	markerScript     = newScript(markerSrc)
	bootstrapScript  = newScript(bootstrapSrc)
)
