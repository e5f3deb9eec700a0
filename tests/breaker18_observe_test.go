package tests

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// subscribedChannels counts the channels of names under prefix that some
// connection subscribes to on server.
func subscribedChannels(t *testing.T, s *redistest.Server, prefix string) int {
	t.Helper()
	v, err := s.Do("PUBSUB", "CHANNELS", "lock-agent:{"+prefix+"*")
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(v)
	return n
}

// TestBreaker18ObserversOfManyNamesLeaveNothingBehind: sessions that each
// observe hundreds of names and close abruptly (no UNOBSERVE) leave no
// subscription on the masters, and the marks of the names expire; a
// session that UNOBSERVEs does the same.
func TestBreaker18ObserversOfManyNamesLeaveNothingBehind(t *testing.T) {
	const names = 300
	a, _, servers := twoAgents(t, time.Second)
	for _, how := range []string{"close", "unobserve"} {
		c := agenttest.Dial(t, a.Config.Socket.Path)
		for i := range names {
			if r := c.Do(fmt.Sprintf("OBSERVE obs-%s/%d", how, i)); r.Kind != "OK" {
				t.Fatal(r.Line)
			}
		}
		prefix := "obs-" + how + "/"
		lockagenttest.Eventually(t, 5*time.Second, func() bool { return subscribedChannels(t, servers[0], prefix) == names },
			"the agent never subscribed to the %d observed names", names)
		if n := servers[0].Keys("lock-agent:{" + prefix + "*}:obs"); n != names {
			t.Fatalf("%d names marked observed, want %d", n, names)
		}
		if how == "close" {
			c.Close()
		} else {
			for i := range names {
				if r := c.Do(fmt.Sprintf("UNOBSERVE obs-%s/%d", how, i)); r.Kind != "OK" {
					t.Fatal(r.Line)
				}
			}
		}
		for _, s := range servers {
			lockagenttest.Eventually(t, 5*time.Second, func() bool { return subscribedChannels(t, s, prefix) == 0 },
				"subscriptions of observed names left after the session %s", how)
			lockagenttest.Eventually(t, 5*time.Second, func() bool { return s.Keys("lock-agent:{"+prefix+"*}:obs") == 0 },
				"marks of observed names left after the session %s", how)
		}
	}
}
