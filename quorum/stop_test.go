package quorum

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// logEvent is a log output that closes seen at the first line holding
// want: a test waits for what the code logs, not for a guessed time.
type logEvent struct {
	want []byte
	once sync.Once
	seen chan struct{}
}

func (l *logEvent) Write(p []byte) (int, error) {
	if bytes.Contains(p, l.want) {
		l.once.Do(func() { close(l.seen) })
	}
	return len(p), nil
}

// TestStopDoesNotWaitForAFailedSubscriptionToClose: with every master
// paused, a subscription that failed closes its connection, which waits up
// to a second for the paused master's answer to a PING; a stop that comes
// meanwhile does not wait for it. (It did: the close held the master's
// subscription lock, which its subscribeLoop takes when the connection
// ends, and Run waits for subscribeLoop: a second more on a stop bounded
// by its graces, TestBinaryStopsWithin5sWithMastersPaused's 5.5s.)
func TestStopDoesNotWaitForAFailedSubscriptionToClose(t *testing.T) {
	servers := redistest.Start(t, 3)
	cfg := testConfig(t, servers, time.Second, true)
	failed := &logEvent{want: []byte("subscribe failed"), seen: make(chan struct{})}
	cfg.Logger = hclog.New(&hclog.LoggerOptions{Output: failed, Level: hclog.Debug})
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopped := make(chan struct{})
	go func() {
		c.Run(ctx)
		close(stopped)
	}()
	waitStates(t, c, func(st []MasterStatus) bool {
		for _, s := range st {
			if s.State != StateUp {
				return false
			}
		}
		return true
	})
	before := c.Watch(context.Background(), "before")
	defer before.Close()
	awaitSubscribed(t, c, servers, "before") // every master's subscription is live
	for _, s := range servers {
		s.Pause()
		defer s.Resume()
	}
	w := c.Watch(context.Background(), "after") // its subscription cannot be confirmed
	defer w.Close()
	select {
	case <-failed.seen:
	case <-time.After(10 * time.Second):
		t.Fatal("no subscription failed with every master paused")
	}
	start := time.Now()
	cancel()
	<-stopped
	// Run's own graces: stopGrace for the background work (the failed
	// subscription's goroutine among it) and closeGrace for closing the
	// paused masters' connections; the failed connection's close is not
	// waited for on top of them.
	took := time.Since(start)
	if bound := stopGrace + closeGrace; took > bound {
		t.Fatalf("Run took %v to stop, over %v", took, bound)
	}
	t.Logf("stopped in %v", took)
}
