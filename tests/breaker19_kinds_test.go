package tests

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/agenttest"
)

// TestBreaker19EveryKindOfRemoteLockTakesACachedName: with a long linger
// (1m), a name cached by one agent must be given up to a LOCK of any kind
// on the other agent that can hold it: fair, ttl=, multi-name, shared,
// wait=0 or not; each granted promptly, not after the linger.
func TestBreaker19EveryKindOfRemoteLockTakesACachedName(t *testing.T) {
	a, b, _ := twoCachingAgents(t, 3*time.Second, time.Minute)
	ca, cb := agenttest.Dial(t, a.Config.Socket.Path), agenttest.Dial(t, b.Config.Socket.Path)
	for _, ask := range []string{"wait=5s", "wait=0", "fair=true wait=5s", "fair=true wait=0", "ttl=5s wait=5s",
		"ttl=5s wait=0", "mode=shared wait=5s", "mode=shared wait=0", "+other wait=5s", "+other wait=0"} {
		t.Run(ask, func(t *testing.T) {
			name := "kind19-" + strings.NewReplacer(" ", "-", "=", "", "+", "").Replace(ask)
			first := cacheIt(t, ca, "LOCK "+name)
			awaitCachedWho(t, cb, name, "host-a", 0)
			line := "LOCK " + name + " " + ask
			if rest, ok := strings.CutPrefix(ask, "+"); ok {
				line = "LOCK " + name + " " + name + "-" + rest
			}
			start := time.Now()
			r := cb.Do(line)
			took := time.Since(start)
			if r.Kind != "OK" || took > 2*time.Second {
				t.Fatalf("%s on the other agent: %s after %v", line, r.Line, took)
			}
			if f, _ := strconv.ParseInt(strings.Split(r.Fields["fence"], ",")[0], 10, 64); f <= first.Int("fence") {
				t.Fatalf("%s: fence %d, the cached one %d", line, f, first.Int("fence"))
			}
			t.Logf("%s: granted in %v", line, took)
			if l := ca.Do("LOCK " + name + " wait=0"); l.Kind != "BUSY" {
				t.Fatalf("the caching agent lent a name the other agent holds: %s", l.Line)
			}
		})
	}
}
