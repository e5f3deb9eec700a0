package quorum

import "context"

// Lock caching. An agent may keep a hold's record in the masters after its
// last local client let go (see agent/cache.go), so that its next local
// LOCK of the name needs no round. The record then says so: its hash has
// the field cached=1. An acquire that finds only cached records in its way
// says so (Refusal.OnlyCached), and its agent tells the caching agents
// that it waits (Wanted), which makes them release at once; a record a
// client really holds answers BUSY as before. WHO shows a cached record as
// cached, and it leads nothing (see Leader).
//
// The mark is a hint, never a fact to be safe by: an agent writes it after
// the client's UNLOCK was answered, and clears it after it granted the
// name to a local client again, so a remote acquire may find a record
// marked cached that a client holds (it then waits for a release that
// does not come soon, and answers BUSY after its bounded wait), or one not
// marked that no client holds (BUSY, as for a held name). Exclusion never
// depends on it: only the caching agent ever removes its record.

// cachedSrc marks a live record cached or not, and says so to the name's
// observers (a cached record leads nothing). It never creates a record.
// KEYS: holder key, observed mark. ARGV: "1" or "0", channel.
// Returns 1 if the record is there.
const cachedSrc = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if (redis.call('HGET', KEYS[1], 'cached') or '0') == ARGV[1] then return 1 end
redis.call('HSET', KEYS[1], 'cached', ARGV[1])
if KEYS[2] and redis.call('EXISTS', KEYS[2]) == 1 then redis.call('PUBLISH', ARGV[2], 'leader changed') end
return 1
`

var cachedScript = newScript(cachedSrc, -1)

// MarkCached writes on every master that has holder's record of name
// whether its agent keeps it cached (no client holds it). Like Retag it
// goes to every connected master and lands in the background on those that
// answer late; it returns once a majority has it (or after
// min(2×MasterTimeout, 1s)) and says on how many masters it landed by then.
func (c *Cluster) MarkCached(ctx context.Context, name, holder string, cached bool) int {
	if c.closed() {
		return 0
	}
	mark := "0"
	if cached {
		mark = "1"
	}
	keys, args := []string{c.holderKey(name, holder), c.observedKey(name)}, []string{mark, c.channel(name)}
	res, _ := c.vote(ctx, roundSpec{op: OpSet, script: cachedScript, keys: keys, args: args, land: true,
		judge: func(a answer) (int, bool, error) {
			v, err := a.res.AsInt64()
			return 0, err == nil && v == 1, err
		}})
	return res.yes()
}
