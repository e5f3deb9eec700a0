package agent_test

import (
	"bytes"
	"runtime"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/agenttest"
)

// TestAHandOverWakesTheContenderThatWaitedForIt: the name's contender waits
// for a run of local holders to pass the name to its head; when the run
// passes it, the contender looks at its queue again. Otherwise it kept
// waiting for a waiter no longer in its queue, and a LOCK that joined the
// queue, empty now but not retired, had nobody to work for it: a wait=0
// LOCK went unanswered for as long as the new holder held the name.
func TestAHandOverWakesTheContenderThatWaitedForIt(t *testing.T) {
	a, _ := start(t, nil)
	path := a.Config.Socket.Path
	blocker, first, second, late := agenttest.Dial(t, path), agenttest.Dial(t, path), agenttest.Dial(t, path), agenttest.Dial(t, path)
	if r := blocker.Do("LOCK n"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	_, firstGrant := first.Send("LOCK n wait=10s")
	late.AwaitWaiters(1)
	_, secondGrant := second.Send("LOCK n wait=10s")
	late.AwaitWaiters(2)
	// Parked: its next attempt, after the release, sees both waiters. With
	// two cohortable waiters, first's grant reserves a block and starts a
	// run; the contender then waits for it to pass second the name.
	awaitGoroutineIn(t, "(*contending).park")
	blocker.Do("UNLOCK n")
	if r := first.Await(firstGrant); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	awaitGoroutineIn(t, "(*contending).awaitCohort")
	first.Do("UNLOCK n") // passes n to second
	if r := second.Await(secondGrant); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	_, busy := late.Send("LOCK n wait=0")
	select {
	case r := <-busy:
		if r.Kind != "BUSY" {
			t.Fatalf("a wait=0 LOCK of a name held by another session: %s, want BUSY", r.Line)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a wait=0 LOCK of a name passed on in a run got no answer in 5s")
	}
	second.Do("UNLOCK n")
	if r := late.Do("LOCK n wait=5s"); r.Kind != "OK" {
		t.Fatalf("n once its last holder let go: %s", r.Line)
	}
}

// awaitGoroutineIn waits until a goroutine of the test binary runs fn.
func awaitGoroutineIn(t *testing.T, fn string) {
	t.Helper()
	var stacks []byte
	lockagenttest.Eventually(t, 5*time.Second, func() bool { stacks = allStacks(); return bytes.Contains(stacks, []byte(fn)) },
		"no goroutine in %s after 5s\n%s", fn, &stacks)
}

// allStacks is every goroutine's stack, as runtime.Stack gives it.
func allStacks() []byte {
	for buf := make([]byte, 1<<20); ; buf = make([]byte, 2*len(buf)) {
		if n := runtime.Stack(buf, true); n < len(buf) {
			return buf[:n]
		}
	}
}
