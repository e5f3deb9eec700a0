package tests

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/agent"
	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/agenttest"
)

// awaitQueued waits until WHO name shows n live entries in its queue.
func awaitQueued(t *testing.T, c *agenttest.Conn, name string, n int64) {
	t.Helper()
	var r agenttest.Reply
	lockagenttest.Eventually(t, 3*time.Second, func() bool { r = c.Do("WHO " + name); return max(r.Int("queued"), 0) == n },
		"%s has not %d queued: %s", name, n, &r.Line)
}

// TestFairWaitersFromAlternatingAgentsInArrivalOrder: fair waiters that
// arrive at two agents in turn are granted exactly in arrival order, with
// growing fences, though the holder keeps the name for longer than a lease
// (live waiters never expire), and the waiters of one agent are not served
// together.
func TestFairWaitersFromAlternatingAgentsInArrivalOrder(t *testing.T) {
	t.Parallel() // see TestMain
	const lease = time.Second
	a, b, _ := twoAgents(t, lease)
	holder := agenttest.Dial(t, a.Config.Socket.Path)
	watcher := agenttest.Dial(t, b.Config.Socket.Path)
	first := holder.Do("LOCK f fair=true")
	if first.Kind != "OK" {
		t.Fatal(first.Line)
	}
	if r := watcher.Do("LOCK f fair=true wait=0"); r.Kind != "BUSY" {
		t.Fatalf("fair with wait=0 while held: %s", r.Line)
	}
	awaitQueued(t, watcher, "f", 0) // wait=0 never queues

	const n = 6
	conns := make([]*agenttest.Conn, n)
	chans := make([]<-chan agenttest.Reply, n)
	for i := range n {
		agent := a
		if i%2 == 1 {
			agent = b
		}
		conns[i] = agenttest.Dial(t, agent.Config.Socket.Path)
		_, chans[i] = conns[i].Send("LOCK f fair=true wait=20s")
		awaitQueued(t, watcher, "f", int64(i+1))
	}
	time.Sleep(5 * lease / 2) // heartbeats keep every entry
	awaitQueued(t, watcher, "f", n)
	holder.Do("UNLOCK f")
	fence := first.Int("fence")
	for i := range n {
		r := conns[i].Await(chans[i])
		if r.Kind != "OK" || r.Int("fence") <= fence {
			t.Fatalf("waiter %d: %s (last fence %d)", i, r.Line, fence)
		}
		fence = r.Int("fence")
		for j := i + 1; j < n; j++ {
			select {
			case r := <-chans[j]:
				t.Fatalf("waiter %d was granted while waiter %d held: %s", j, i, r.Line)
			default:
			}
		}
		time.Sleep(20 * time.Millisecond) // time for a wrong grant to show
		for j := i + 1; j < n; j++ {
			select {
			case r := <-chans[j]:
				t.Fatalf("waiter %d was granted while waiter %d held: %s", j, i, r.Line)
			default:
			}
		}
		conns[i].Do("UNLOCK f")
	}
	awaitQueued(t, watcher, "f", 0)
}

// TestFairWaiterOfAKilledAgentLeavesTheQueue: the entry of a waiter whose
// agent is killed stops blocking the queue within that agent's lease; the
// waiter behind it is then served.
func TestFairWaiterOfAKilledAgentLeavesTheQueue(t *testing.T) {
	const lease = time.Second
	cmd, _, _, sock, servers := binaryAgent(t, fmt.Sprintf("lock {\n  lease = %q\n}\n", lease))
	cfg := agenttest.Config(t, servers, lease)
	cfg.AgentID = "survivor"
	cfg.Lock.MaxTTL = agent.Default().Lock.MaxTTL // the binary agent's: the masters record the quarantine it implies
	b := agenttest.Start(t, cfg)
	holder := agenttest.Dial(t, b.Config.Socket.Path)
	if r := holder.Do("LOCK k"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	doomed := agenttest.Dial(t, sock)
	doomed.Send("LOCK k fair=true wait=30s")
	awaitQueued(t, holder, "k", 1)
	behind := agenttest.Dial(t, b.Config.Socket.Path)
	_, ch := behind.Send("LOCK k fair=true wait=30s")
	awaitQueued(t, holder, "k", 2)

	cmd.Process.Signal(syscall.SIGKILL)
	killed := time.Now()
	holder.Do("UNLOCK k")
	r := behind.Await(ch)
	if r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	if waited := time.Since(killed); waited > lease+500*time.Millisecond {
		t.Fatalf("the waiter behind a dead agent's entry waited %v, lease %v", waited, lease)
	}
	awaitQueued(t, holder, "k", 0)
}

// TestQueuedWriterGoesBeforeLaterReaders: a writer that only readers keep
// out takes a place in the name's queue, so a reader arriving after it
// (on another agent) is granted after it.
func TestQueuedWriterGoesBeforeLaterReaders(t *testing.T) {
	a, b, _ := twoAgents(t, 3*time.Second)
	reader := agenttest.Dial(t, a.Config.Socket.Path)
	if r := reader.Do("LOCK rw mode=shared"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	writer := agenttest.Dial(t, b.Config.Socket.Path)
	_, wch := writer.Send("LOCK rw wait=10s")
	awaitQueued(t, reader, "rw", 1)
	late := agenttest.Dial(t, a.Config.Socket.Path)
	if r := late.Do("LOCK rw mode=shared wait=0"); r.Kind != "BUSY" {
		t.Fatalf("a reader passed a queued writer: %s", r.Line)
	}
	_, rch := late.Send("LOCK rw mode=shared wait=10s")
	time.Sleep(100 * time.Millisecond) // time for a wrong grant to show
	select {
	case r := <-rch:
		t.Fatalf("a later reader joined the readers before the queued writer: %s", r.Line)
	default:
	}
	reader.Do("UNLOCK rw")
	w := writer.Await(wch)
	if w.Kind != "OK" {
		t.Fatal(w.Line)
	}
	select {
	case r := <-rch:
		t.Fatalf("the reader was granted with the writer holding: %s", r.Line)
	case <-time.After(100 * time.Millisecond):
	}
	writer.Do("UNLOCK rw")
	if r := late.Await(rch); r.Kind != "OK" || r.Int("fence") <= w.Int("fence") {
		t.Fatalf("the reader after the writer: %s", r.Line)
	}
}
