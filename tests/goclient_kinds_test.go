package tests

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	lockagent "github.com/lock-agent/lock-agent/clients/go"
	"github.com/lock-agent/lock-agent/internal/agenttest"
)

func dialClient(t *testing.T, path string) *lockagent.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := lockagent.Dial(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestGoClientFairWaitersInArrivalOrder: Fair() waiters of two Go clients on
// two agents, arriving in turn, are granted exactly in arrival order, each
// with a larger fence, none while an earlier one holds.
func TestGoClientFairWaitersInArrivalOrder(t *testing.T) {
	a, b, _ := twoAgents(t, time.Second)
	clients := []*lockagent.Client{dialClient(t, a.Config.Socket.Path), dialClient(t, b.Config.Socket.Path)}
	watcher := agenttest.Dial(t, b.Config.Socket.Path)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	holder, err := clients[0].Lock(ctx, "gofair", lockagent.Fair())
	if err != nil {
		t.Fatal(err)
	}
	type grant struct {
		lock *lockagent.Lock
		err  error
	}
	const n = 6
	granted := make([]chan grant, n)
	for i := range n {
		granted[i] = make(chan grant, 1)
		go func() {
			l, err := clients[i%2].Lock(ctx, "gofair", lockagent.Fair(), lockagent.Wait(20*time.Second))
			granted[i] <- grant{l, err}
		}()
		awaitQueued(t, watcher, "gofair", int64(i+1)) // arrival order is i's order
	}
	fence := holder.Fence()
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		var g grant
		select {
		case g = <-granted[i]:
		case <-time.After(5 * time.Second):
			t.Fatalf("waiter %d (on agent %d) not granted within 5s of its turn", i, i%2)
		}
		if g.err != nil || g.lock.Fence() <= fence {
			t.Fatalf("waiter %d: %v, fence %d after %d", i, g.err, g.lock.Fence(), fence)
		}
		fence = g.lock.Fence()
		time.Sleep(20 * time.Millisecond) // time for a wrong grant to show
		for j := i + 1; j < n; j++ {
			select {
			case g := <-granted[j]:
				t.Fatalf("waiter %d was granted (%v) while waiter %d held", j, g.err, i)
			default:
			}
		}
		if err := g.lock.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	awaitQueued(t, watcher, "gofair", 0)
}

// TestGoClientLockAllWithTTL: LockAll with TTL over real masters reports a
// validity no longer than the TTL for every name; each name then ends on its
// own with a *LostError "expired", and the other agent gets them.
func TestGoClientLockAllWithTTL(t *testing.T) {
	a, b, _ := twoAgents(t, 3*time.Second)
	c, other := dialClient(t, a.Config.Socket.Path), dialClient(t, b.Config.Socket.Path)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const ttl = 800 * time.Millisecond
	ls, err := c.LockAll(ctx, []string{"gottl/b", "gottl/a"}, lockagent.TTL(ttl))
	if err != nil || len(ls) != 2 || ls[0].Name() != "gottl/b" {
		t.Fatalf("LockAll: %v %v", ls, err)
	}
	granted := time.Now()
	for _, l := range ls {
		if v := l.Validity(); v <= 0 || v > ttl {
			t.Fatalf("%s: validity %v with a %v ttl", l.Name(), v, ttl)
		}
		if l.Fence() == 0 {
			t.Fatalf("%s: no fence", l.Name())
		}
	}
	if _, err := other.LockAll(ctx, []string{"gottl/a", "gottl/c"}, lockagent.Wait(0)); !errors.Is(err, lockagent.ErrBusy) {
		t.Fatalf("another agent's LockAll over a held name: %v", err)
	}
	for _, l := range ls {
		select {
		case <-l.Done():
		case <-time.After(3 * time.Second):
			t.Fatalf("%s still held 3s after a %v ttl", l.Name(), ttl)
		}
		var lost *lockagent.LostError
		if !errors.As(l.Err(), &lost) || lost.Reason != "expired" {
			t.Fatalf("%s: %v, want lost, expired", l.Name(), l.Err())
		}
	}
	if d := time.Since(granted); d > ttl+500*time.Millisecond {
		t.Fatalf("the locks ended %v after a %v ttl", d, ttl)
	}
	ls, err = other.LockAll(ctx, []string{"gottl/a", "gottl/b"}, lockagent.Wait(time.Second))
	if err != nil {
		t.Fatalf("the expired names on the other agent: %v", err)
	}
	for _, l := range ls {
		l.Unlock(ctx)
	}
}

// TestPythonLockAllAgainstRealMasters runs testdata/python_lock_all.py:
// lock_all, sync and asyncio, on one agent while a client of another agent
// over the same real masters holds and watches the names.
func TestPythonLockAllAgainstRealMasters(t *testing.T) {
	t.Parallel() // its own masters and agents; judges no latency
	a, b, _ := twoAgents(t, 3*time.Second)
	cmd := exec.Command("python3", "tests/testdata/python_lock_all.py")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "LOCK_AGENT_SOCKET="+a.Config.Socket.Path,
		"OTHER_AGENT_SOCKET="+b.Config.Socket.Path, "PYTHONPATH=clients/python")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "python lock_all: all checks passed") {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Logf("%s", out)
}
