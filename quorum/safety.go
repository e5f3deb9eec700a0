package quorum

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// UnsafeError says why a master may forget holds, and so must not vote.
type UnsafeError struct {
	// Reason is one word-like token, e.g. "role:slave",
	// "connected_slaves:1", "maxmemory_policy:allkeys-lru".
	Reason string
}

func (e *UnsafeError) Error() string { return "unsafe master: " + e.Reason }

// Unwrap makes an UnsafeError match ErrUnsafe.
func (e *UnsafeError) Unwrap() error { return ErrUnsafe }

// checkSafety reads the master's INFO and returns why it is unsafe, nil if
// it is safe, and ok false when it could not tell (a timeout on a busy
// master says nothing about its configuration: the last verdict stands).
// A master that refuses INFO cannot be checked, and is unsafe.
func (m *master) checkSafety(ctx context.Context) (unsafe error, ok bool) {
	c := m.conn(laneHealth)
	if c == nil {
		return nil, false
	}
	return m.checkSafetyOn(ctx, c)
}

// checkSafetyOn is checkSafety on the server c: the master, or a shard's
// primary.
func (m *master) checkSafetyOn(ctx context.Context, c rueidis.Client) (unsafe error, ok bool) {
	info, err := c.Do(ctx, c.B().Info().Build()).ToString()
	if _, refused := rueidis.IsRedisErr(err); refused {
		return &UnsafeError{Reason: "info-refused:" + token(describe(err))}, true
	}
	if err != nil {
		return nil, false
	}
	fields := infoFields(info)
	policy := replicaPolicy{allow: m.cfg.AllowReplicas, lag: m.cfg.replicaLag()}
	if unsafe := unsafeInfo(fields, policy); unsafe != nil || !policy.promotable(fields) {
		return unsafe, true
	}
	return m.checkReplicaGuard(ctx, c, fields, policy)
}

// replicaPolicy is what a master's configuration says of its replicas:
// allow accepts them unchecked (AllowReplicas), lag > 0 accepts replicas
// that may be promoted, under a guard (see standalone.go).
type replicaPolicy struct {
	allow bool
	lag   time.Duration
}

// promotable says whether the master has replicas that may be promoted,
// which its configuration must then guard against a split brain.
func (p replicaPolicy) promotable(fields map[string]string) bool {
	n, _ := strconv.Atoi(fields["connected_slaves"])
	return n > 0 && !p.allow && p.lag > 0
}

// infoFields are INFO's "key:value" lines as a map.
func infoFields(info string) map[string]string {
	fields := map[string]string{}
	for _, line := range strings.Split(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			fields[k] = v
		}
	}
	return fields
}

// unsafeInfo judges a master by its INFO fields. A master is unsafe when it
// is a replica (its data is whatever its master sent, and it refuses
// writes); when replicas are attached (a failover would promote one that
// missed the last grants), unless the policy allows them, or accepts
// promotable ones and the primary refuses writes without them
// (min-replicas-to-write and min-replicas-max-lag both set: INFO then
// reports min_slaves_good_slaves); or when its maxmemory policy may evict
// keys (an evicted holder key is a second holder; an evicted fence counter
// repeats fences). Fields a server does not report are not judged.
func unsafeInfo(fields map[string]string, policy replicaPolicy) error {
	if role, ok := fields["role"]; ok && role != "master" {
		return &UnsafeError{Reason: "role:" + role}
	}
	if n, _ := strconv.Atoi(fields["connected_slaves"]); n > 0 && !policy.allow {
		_, guarded := fields["min_slaves_good_slaves"]
		switch {
		case policy.lag == 0:
			return &UnsafeError{Reason: fmt.Sprintf("connected_slaves:%d", n)}
		case !guarded:
			return &UnsafeError{Reason: fmt.Sprintf("connected_slaves:%d-without-min-replicas-to-write", n)}
		}
	}
	if p, ok := fields["maxmemory_policy"]; ok && p != "noeviction" {
		return &UnsafeError{Reason: "maxmemory_policy:" + p}
	}
	return nil
}

// checkReplicaGuard reads the primary's min-replicas settings, when it lets
// CONFIG GET be run, and returns why they do not bound a split brain: every
// replica must acknowledge (one left out may be the one promoted, while
// the old primary goes on with the others), within the master's
// ReplicaLag (the failover margin counts on it). A primary that refuses
// CONFIG is judged by its INFO alone.
func (m *master) checkReplicaGuard(ctx context.Context, c rueidis.Client, fields map[string]string, policy replicaPolicy) (error, bool) {
	vals, err := c.Do(ctx, c.B().ConfigGet().Parameter("min-replicas-to-write", "min-replicas-max-lag").Build()).AsStrMap()
	if _, refused := rueidis.IsRedisErr(err); refused {
		return nil, true
	}
	if err != nil {
		return nil, false
	}
	replicas, _ := strconv.Atoi(fields["connected_slaves"])
	toWrite, _ := strconv.Atoi(vals["min-replicas-to-write"])
	maxLag, _ := strconv.Atoi(vals["min-replicas-max-lag"])
	switch {
	case toWrite < replicas:
		return &UnsafeError{Reason: fmt.Sprintf("min-replicas-to-write:%d<connected_slaves:%d", toWrite, replicas)}, true
	case time.Duration(maxLag)*time.Second > policy.lag:
		return &UnsafeError{Reason: fmt.Sprintf("min-replicas-max-lag:%d>max_replica_lag:%s", maxLag, policy.lag)}, true
	}
	return nil, true
}

// token makes s one word: spaces become dashes.
func token(s string) string { return strings.ReplaceAll(strings.TrimSpace(s), " ", "-") }
