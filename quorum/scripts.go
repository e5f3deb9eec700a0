package quorum

import (
	"crypto/sha1"
	"encoding/hex"
)

// A name's keys on one master all share the hash tag {name}, so a master may
// be a Redis Cluster:
//
//	P{name}            set of holder ids that may hold the name
//	P{name}:h:HOLDER   one per holder; value = who-info; PX = its lease
//	P{name}:fence      the fence counter; never expires
//	P{name}:released:HOLDER  tombstone of a release that found no key (see releaseSrc)
//
// The set expires no sooner than any member's holder key, so a live holder
// key is always listed. A listed member whose holder key is gone is stale and
// is dropped by the next acquire.

// acquireSrc grants HOLDER if no other live holder is listed and HOLDER's
// attempt was not already released (a tombstone: see releaseSrc).
// KEYS: set, fence, holder key. ARGV: holder, lease ms, info, holder key prefix.
// Returns {1, fence} on grant, {0, ms until the longest other holder's lease
// ends} when held, {0, -1} when the attempt was released before it arrived.
const acquireSrc = `
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
local fence = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[3], ARGV[3] .. ' fence=' .. fence, 'PX', ARGV[2])
redis.call('SADD', KEYS[1], ARGV[1])
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return {1, fence}
`

// renewSrc sets HOLDER's lease to ms if it still holds. Used by the watchdog
// and by EXTEND. KEYS: set, holder key. ARGV: holder, lease ms. Returns 1 or 0.
const renewSrc = `
if redis.call('PEXPIRE', KEYS[2], ARGV[2]) == 0 then return 0 end
redis.call('SADD', KEYS[1], ARGV[1])
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 1
`

// releaseSrc drops HOLDER and wakes waiters anywhere. Holder ids are one per
// acquire attempt, so a release that finds no key arrived before (or
// instead of) its attempt's acquire: commands to one master can be reordered
// by reconnects, script reloads and deadlines. It then leaves a tombstone for
// tombstone ms so that a late acquire of that attempt is refused instead of
// orphaning a key for a whole lease.
// KEYS: set, holder key. ARGV: holder, channel, name, tombstone ms. Returns 1 if it held.
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

// raiseFenceSrc raises the fence counter to at least ARGV[1].
// KEYS: fence. Returns the counter after.
const raiseFenceSrc = `
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

// markerSrc returns the master's data marker, planting ARGV[1] if there is
// none. A marker that changes or vanishes means the master lost its data.
// KEYS: marker.
const markerSrc = `
local v = redis.call('GET', KEYS[1])
if v then return v end
redis.call('SET', KEYS[1], ARGV[1])
return ARGV[1]
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
var allScripts = []*script{acquireScript, renewScript, releaseScript, raiseFenceScript, whoScript, markerScript}

var (
	acquireScript    = newScript(acquireSrc)
	renewScript      = newScript(renewSrc)
	releaseScript    = newScript(releaseSrc)
	raiseFenceScript = newScript(raiseFenceSrc)
	whoScript        = newScript(whoSrc)
	markerScript     = newScript(markerSrc)
)
