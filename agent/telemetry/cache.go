package telemetry

import "github.com/prometheus/client_golang/prometheus"

// cacheSeries count lock caching (see the agent's cache.go).
type cacheSeries struct {
	// CachedGrants counts LOCKs answered from a cached record, with no
	// round on the masters.
	CachedGrants prometheus.Counter
	// CacheGiveUps counts cached records given up before their linger
	// ended: another agent waited, a LOCK the cache could not lend to came,
	// or the record was lost.
	CacheGiveUps prometheus.Counter
}

func newCacheSeries(f factory) cacheSeries {
	return cacheSeries{
		CachedGrants: f.counter("cached_grants_total", "LOCKs granted from a name this agent kept cached, with no round on the masters."),
		CacheGiveUps: f.counter("cache_give_ups_total", "Cached names given up before cache_linger ended: another agent waited for one, a LOCK it could not serve came, or its record was lost."),
	}
}
