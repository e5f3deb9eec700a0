package tests

import (
	"fmt"
	"math/rand"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// mixedLine is one random request over two names and two owners: LOCKs of
// every kind (one or both names, shared, a semaphore, fair, ttl=) with
// short waits, UNLOCK, EXTEND, WHO, CANCEL of an earlier LOCK, HOLDS.
func mixedLine(rng *rand.Rand, i int) string {
	names := []string{"m0", "m1"}
	name, owner := names[rng.Intn(2)], fmt.Sprintf("o%d", rng.Intn(2))
	wait := []string{"wait=0", "wait=20ms", "wait=100ms"}[rng.Intn(3)]
	opts := []string{"", "mode=shared", "ttl=300ms", "fair=true"}[rng.Intn(4)]
	switch x := rng.Intn(100); {
	case x < 30:
		return fmt.Sprintf("t%d LOCK %s owner=%s %s %s", i, name, owner, wait, opts)
	case x < 38:
		return fmt.Sprintf("t%d LOCK m0 m1 owner=%s %s", i, owner, wait)
	case x < 60:
		return fmt.Sprintf("t%d UNLOCK %s owner=%s", i, name, owner)
	case x < 70:
		return fmt.Sprintf("t%d EXTEND %s owner=%s ttl=%dms", i, name, owner, 50+rng.Intn(500))
	case x < 85:
		return fmt.Sprintf("t%d WHO %s", i, name)
	case x < 95 && i > 0:
		return fmt.Sprintf("t%d CANCEL t%d", i, rng.Intn(i))
	}
	return fmt.Sprintf("t%d HOLDS", i)
}

// TestHostileMixedPipelineIsAnswered: pipelines of random requests on two
// names by two owners of one connection, with short waits only: every
// request is answered (a LOCK with a short wait cannot be held up for
// long, so neither can anything behind it), and once the connection
// closes the agent holds nothing.
func TestHostileMixedPipelineIsAnswered(t *testing.T) {
	t.Parallel() // see TestMain
	servers := redistest.Start(t, 3)
	cfg := agenttest.Config(t, servers, time.Second)
	cfg.Limits.MaxHoldsPerSession = 100000
	a := agenttest.Start(t, cfg)
	c := agenttest.Dial(t, a.Config.Socket.Path)
	for seed := int64(1); seed <= 12; seed++ {
		rng := rand.New(rand.NewSource(seed))
		var lines []string
		for i := 0; i < 400; i++ {
			lines = append(lines, mixedLine(rng, i))
		}
		conn, err := net.Dial("unix", a.Config.Socket.Path)
		if err != nil {
			t.Fatal(err)
		}
		go conn.Write([]byte(strings.Join(lines, "\n") + "\n"))
		got, odd := readFinals(conn, len(lines), 30*time.Second)
		if len(got) < len(lines) {
			var missing []string
			for _, l := range lines {
				if _, ok := got[strings.Fields(l)[0]]; !ok {
					missing = append(missing, l)
				}
			}
			t.Errorf("seed %d: %d of %d requests unanswered after 30s (%v), first: %q", seed, len(missing), len(lines), odd, missing[:min(len(missing), 8)])
		}
		conn.Close()
		var st agenttest.Reply
		lockagenttest.Eventually(t, 5*time.Second, func() bool {
			st = c.Do("STATUS")
			return st.Int("holds") == 0 && st.Int("waiters") == 0 && st.Int("sessions") == 1
		}, "seed %d: after the connection closed: %+v", seed, &st)
		if t.Failed() {
			t.Logf("seed %d lines:\n%s", seed, strings.Join(lines, "\n"))
			return
		}
	}
}
