package quorum

import (
	"context"
	"fmt"
	"strconv"
	"strings"

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
	info, err := c.Do(ctx, c.B().Info().Build()).ToString()
	if _, refused := rueidis.IsRedisErr(err); refused {
		return &UnsafeError{Reason: "info-refused:" + token(describe(err))}, true
	}
	if err != nil {
		return nil, false
	}
	return unsafeInfo(info, m.cfg.AllowReplicas), true
}

// unsafeInfo judges a master by its INFO text. A master is unsafe when it
// is a replica (its data is whatever its master sent, and it refuses
// writes), when replicas are attached (a failover would promote one that
// missed the last grants) unless allowReplicas, or when its maxmemory policy
// may evict keys (an evicted holder key is a second holder; an evicted fence
// counter repeats fences). Fields a server does not report are not judged.
func unsafeInfo(info string, allowReplicas bool) error {
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch k {
		case "role":
			if v != "master" {
				return &UnsafeError{Reason: "role:" + v}
			}
		case "connected_slaves":
			if n, _ := strconv.Atoi(v); n > 0 && !allowReplicas {
				return &UnsafeError{Reason: fmt.Sprintf("connected_slaves:%d", n)}
			}
		case "maxmemory_policy":
			if v != "noeviction" {
				return &UnsafeError{Reason: "maxmemory_policy:" + v}
			}
		}
	}
	return nil
}

// token makes s one word: spaces become dashes.
func token(s string) string { return strings.ReplaceAll(strings.TrimSpace(s), " ", "-") }
