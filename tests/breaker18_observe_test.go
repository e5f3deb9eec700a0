package tests

import (
	"fmt"
	"strconv"
	"strings"
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
	t.Parallel() // see TestMain
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
		// The subscriptions are made in the background, as the unsubscribes
		// below are: the same bound (5s was passed beside two CPU hogs).
		subscribed := 0
		lockagenttest.Eventually(t, 15*time.Second, func() bool { subscribed = subscribedChannels(t, servers[0], prefix); return subscribed == names },
			"the agent subscribed to %d of the %d observed names", &subscribed, names)
		marked := 0
		lockagenttest.Eventually(t, 5*time.Second, func() bool { marked = servers[0].Keys("lock-agent:{" + prefix + "*}:obs"); return marked == names },
			"%d names marked observed, want %d", &marked, names) // the marks land on m0 in the background
		if how == "close" {
			c.Close()
		} else {
			for i := range names {
				if r := c.Do(fmt.Sprintf("UNOBSERVE obs-%s/%d", how, i)); r.Kind != "OK" {
					t.Fatal(r.Line)
				}
			}
		}
		for _, s := range servers { // nothing left at all, however long the unsubscribes take on a loaded host (5s was short)
			lockagenttest.Eventually(t, 15*time.Second, func() bool { return subscribedChannels(t, s, prefix) == 0 },
				"subscriptions of observed names left after the session %s", how)
			lockagenttest.Eventually(t, 15*time.Second, func() bool { return s.Keys("lock-agent:{"+prefix+"*}:obs") == 0 },
				"marks of observed names left after the session %s", how)
		}
	}
}

// TestBreaker18ObserverAfterPubSubKilled: the masters drop every pub/sub
// connection (CLIENT KILL TYPE pubsub) while a name is observed on another
// agent. Once the agents subscribed again, a change of leader reaches the
// observer by message again (well within the lease/3 timer fallback), and
// no push goes back to an older term.
func TestBreaker18ObserverAfterPubSubKilled(t *testing.T) {
	const lease = 3 * time.Second
	a, b, servers := twoAgents(t, lease)
	holder, observer := agenttest.Dial(t, a.Config.Socket.Path), agenttest.Dial(t, b.Config.Socket.Path)
	if r := observer.Do("OBSERVE ps"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	if p := observer.Push(5 * time.Second); p != "* LEADER ps none" {
		t.Fatalf("first push %q", p)
	}
	last := int64(0)
	for round := range 3 {
		for _, s := range servers {
			if _, err := s.Do("CLIENT", "KILL", "TYPE", "pubsub"); err != nil {
				t.Fatal(err)
			}
		}
		for _, s := range servers {
			lockagenttest.Eventually(t, 5*time.Second, func() bool { return subscribedChannels(t, s, "ps") >= 1 },
				"the agents never subscribed again")
		}
		sent := time.Now()
		r := holder.Do("LOCK ps value=r" + strconv.Itoa(round))
		if r.Kind != "OK" {
			t.Fatal(r.Line)
		}
		want := fmt.Sprintf("* LEADER ps fence=%d value=r%d agent=host-a", r.Int("fence"), round)
		for {
			p := observer.Push(2 * lease)
			if p == "" {
				t.Fatalf("round %d: no push of the new leader", round)
			}
			if f := agenttestFence(p); f > 0 && f < last {
				t.Fatalf("round %d: %q after fence %d", round, p, last)
			}
			if p == want {
				break
			}
		}
		if lag := time.Since(sent); lag > lease/6 {
			t.Errorf("round %d: the new leader reached the observer %v after its LOCK: by the timer, not a message", round, lag)
		}
		last = r.Int("fence")
		if r := holder.Do("UNLOCK ps"); r.Kind != "OK" {
			t.Fatal(r.Line)
		}
		if p := observer.Push(2 * lease); p != "* LEADER ps none" {
			t.Fatalf("round %d: after UNLOCK %q", round, p)
		}
	}
}

// agenttestFence is the fence= of a LEADER push, or 0.
func agenttestFence(p string) int64 {
	for _, w := range strings.Fields(p) {
		if v, ok := strings.CutPrefix(w, "fence="); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}
