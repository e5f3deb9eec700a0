package tests

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	lockagent "github.com/lock-agent/lock-agent/clients/go"
	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// oneAgent starts one agent over three real masters. The lease is long so
// that no fallback read (every lease/3) can stand in for the fresh read a
// new OBSERVE must make.
func oneAgent(t *testing.T) *agenttest.Agent {
	t.Helper()
	servers := redistest.Start(t, 3)
	return agenttest.Start(t, agenttest.Config(t, servers, 15*time.Second))
}

func dialAgent(t *testing.T, a *agenttest.Agent) *lockagent.Client {
	t.Helper()
	c, err := lockagent.Dial(context.Background(), a.Config.Socket.Path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// awaitLeader reads ch until it names fence, or fails after within.
func awaitLeader(t *testing.T, ch <-chan lockagent.Leader, fence int64, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case l, ok := <-ch:
			if !ok {
				t.Fatalf("the observation ended before term %d", fence)
			}
			if l.Fence == fence {
				return
			}
		case <-deadline:
			t.Fatalf("term %d not observed within %v", fence, within)
		}
	}
}

// TestLeaderAfterAHandOverIsTheNewLeader: while the agent observes the name
// already (another client's Observe), a leader resigns (Unlock, or its
// connection closes), the next candidate's Campaign returns, and only then
// a fresh Leader() is asked on the same agent: it must name the new leader,
// never the one that had resigned (issue 31: the agent answered a new
// OBSERVE from the last state it had pushed, and named the resigned leader
// 20 times in 20).
func TestLeaderAfterAHandOverIsTheNewLeader(t *testing.T) {
	for _, resign := range []string{"unlock", "close"} {
		t.Run(resign, func(t *testing.T) {
			a := oneAgent(t)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			watcher, asker := dialAgent(t, a), dialAgent(t, a)
			name := "svc/handover-" + resign
			if _, err := watcher.Observe(ctx, name); err != nil {
				t.Fatal(err)
			}
			leader, next := dialAgent(t, a), dialAgent(t, a)
			lead, err := leader.Campaign(ctx, name, "first")
			if err != nil {
				t.Fatal(err)
			}
			stale := 0
			var took []time.Duration
			const rounds = 20
			for i := range rounds {
				elected := make(chan *lockagent.Lock, 1)
				go func() {
					l, err := next.Campaign(ctx, name, fmt.Sprint("c", i))
					if err != nil {
						t.Error(err)
					}
					elected <- l
				}()
				awaitWaiting(t, asker, 1)
				if resign == "unlock" {
					err = lead.Unlock(ctx)
				} else {
					err = leader.Close()
					leader = dialAgent(t, a)
				}
				if err != nil {
					t.Fatal(err)
				}
				l := <-elected
				if l == nil {
					t.FailNow()
				}
				asked := time.Now()
				got, err := asker.Leader(ctx, name)
				took = append(took, time.Since(asked))
				if err != nil {
					t.Fatal(err)
				}
				if got.Fence != l.Fence() {
					stale++
					t.Logf("round %d: Leader() named term %d (value %q) after Campaign of term %d returned",
						i, got.Fence, got.Value, l.Fence())
				}
				lead, leader, next = l, next, leader
			}
			slices.Sort(took)
			t.Logf("Leader() took p50 %v, max %v", took[len(took)/2].Round(time.Microsecond), took[len(took)-1].Round(time.Microsecond))
			if stale > 0 {
				t.Fatalf("a fresh Leader() named a term that had ended in %d of %d rounds", stale, rounds)
			}
		})
	}
}

// awaitWaiting waits until the agent has n waiting LOCKs.
func awaitWaiting(t *testing.T, c *lockagent.Client, n int) {
	t.Helper()
	var waiters int
	lockagenttest.Eventually(t, 10*time.Second, func() bool {
		st, err := c.Status(context.Background())
		waiters = st.Waiters
		return err == nil && waiters >= n
	}, "the agent never had %d waiters (it has %d)", n, &waiters)
}

// TestObserveAfterLeaderHearsChanges: on one Client, an Observe after a
// Leader() (or after an Observe ended by its context) hears every later
// change. Issue 31: the UNOBSERVE that ended the first went out from a
// goroutine after the next OBSERVE, and the agent ended the new
// observation.
func TestObserveAfterLeaderHearsChanges(t *testing.T) {
	a := oneAgent(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, candidate := dialAgent(t, a), dialAgent(t, a)
	const name = "svc/deaf"
	for i := range 10 {
		if i%2 == 0 {
			if _, err := c.Leader(ctx, name); err != nil {
				t.Fatal(err)
			}
		} else {
			octx, stop := context.WithCancel(ctx)
			ch, err := c.Observe(octx, name)
			if err != nil {
				t.Fatal(err)
			}
			<-ch
			stop()
			for range ch {
			}
		}
		octx, stop := context.WithCancel(ctx)
		ch, err := c.Observe(octx, name)
		if err != nil {
			t.Fatal(err)
		}
		l, err := candidate.Campaign(ctx, name, fmt.Sprint("v", i))
		if err != nil {
			t.Fatal(err)
		}
		awaitLeader(t, ch, l.Fence(), 5*time.Second)
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		stop()
		for range ch {
		}
	}
}
