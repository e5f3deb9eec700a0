package agent_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/lock-agent/lock-agent/agent"
	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// lockedBuffer is a log output the test reads while the agent writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startLogged runs an agent over n new masters, its log in the returned
// buffer, until the test ends.
func startLogged(t *testing.T, n int) (*agenttest.Conn, *lockedBuffer) {
	cfg := agenttest.Config(t, redistest.Start(t, n), time.Second)
	logs := &lockedBuffer{}
	a, err := agent.New(cfg, hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: logs}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	<-a.Ready()
	c := agenttest.Dial(t, cfg.Socket.Path)
	c.AwaitMasters("up", n)
	return c, logs
}

// TestStatusSaysHowManyMastersMayFail: STATUS's tolerates= is how many
// masters may fail while the agent still grants, and an agent whose masters
// tolerate no failure says so in its log when it starts.
func TestStatusSaysHowManyMastersMayFail(t *testing.T) {
	for _, tc := range []struct {
		name              string
		masters           int
		quorum, tolerates int64
		warns             bool
	}{
		{"one master tolerates no failure, and the agent warns", 1, 1, 0, true},
		{"two masters tolerate no failure either", 2, 2, 0, true},
		{"three masters tolerate one", 3, 2, 1, false},
		{"four masters tolerate no more than three", 4, 3, 1, false},
		{"five masters tolerate two", 5, 3, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, logs := startLogged(t, tc.masters)
			r := c.Do("STATUS")
			if r.Int("quorum") != tc.quorum || r.Int("tolerates") != tc.tolerates {
				t.Errorf("STATUS over %d masters: %q, want quorum=%d tolerates=%d", tc.masters, r.Line, tc.quorum, tc.tolerates)
			}
			if warned := strings.Contains(logs.String(), "tolerate no failure"); warned != tc.warns {
				t.Errorf("warned %v, want %v; log:\n%s", warned, tc.warns, logs)
			}
		})
	}
}
