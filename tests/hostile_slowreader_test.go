package tests

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// TestHostileClientThatStopsReading: a client holds names (a ttl= hold
// among them), then pipelines far more requests than the agent queues
// replies for and never reads a reply. The agent goes on serving other
// clients, and the ttl= hold still ends at its ttl: the name is granted to
// another client then, not held on by a session that cannot be told.
func TestHostileClientThatStopsReading(t *testing.T) {
	servers := redistest.Start(t, 3)
	a := agenttest.Start(t, agenttest.Config(t, servers, time.Second))
	conn, err := net.Dial("unix", a.Config.Socket.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The ttl of k runs from its grant, which comes after this write: the
	// time from here is no more than the hold's, however late the holds
	// are seen below (under load, 105ms late was seen).
	sent := time.Now()
	if _, err := conn.Write([]byte("1 LOCK k ttl=1500ms\n2 LOCK w\n3 LOCK s limit=2 ttl=1500ms\n")); err != nil {
		t.Fatal(err)
	}
	other := agenttest.Dial(t, a.Config.Socket.Path)
	lockagentAwaitHolds(t, other, 3)
	flood := strings.Repeat("h HOLDS\nw WHO k\nx EXTEND w ttl=1h\np PING\n", 20000)
	go conn.Write([]byte(flood))
	for i := 0; i < 20; i++ {
		sent := time.Now()
		if r := other.Do("PING"); r.Kind != "OK" || time.Since(sent) > 2*time.Second {
			t.Fatalf("PING from another client: %s after %v", r.Line, time.Since(sent))
		}
	}
	r := other.Do("LOCK k wait=5s")
	if r.Kind != "OK" {
		t.Fatalf("LOCK k from another client: %s (the stuck client's ttl=1500ms hold was asked for %v ago)", r.Line, time.Since(sent))
	}
	if since := time.Since(sent); since < 1500*time.Millisecond {
		t.Fatalf("k granted to another client %v after the ttl=1500ms hold was asked for", since)
	}
}

func lockagentAwaitHolds(t *testing.T, c *agenttest.Conn, n int64) {
	t.Helper()
	lockagenttest.Eventually(t, 5*time.Second, func() bool { return c.Do("STATUS").Int("holds") == n }, "never %d holds", n)
}
