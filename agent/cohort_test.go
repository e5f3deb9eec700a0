package agent_test

import (
	"bytes"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/agent"
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
	// The contender waits for a run: blocker's grant reserved no run's
	// block (nobody waited then), so one is reserved for it now (see
	// lateRun), and blocker's release passes n to first; the contender
	// then waits for the run to pass second the name.
	awaitLending(t, a.Agent, "n", "run")
	blocker.Do("UNLOCK n")
	if r := first.Await(firstGrant); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	awaitLending(t, a.Agent, "n", "run")
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

// TestALocalWaiterAfterTheGrantIsPassedTheName: a lock granted while
// nobody waited here reserved no run's block; a local waiter that comes
// after makes the agent reserve one for the hold (lateRun), and the
// release passes the name to the waiter with no round on the masters: the
// waiter's fence is the block's first, and the masters' counter stays at
// the block's end, where a release and a new grant would have counted to
// the waiter's fence.
func TestALocalWaiterAfterTheGrantIsPassedTheName(t *testing.T) {
	a, servers := start(t, nil)
	path := a.Config.Socket.Path
	holder, waiter := agenttest.Dial(t, path), agenttest.Dial(t, path)
	first := holder.Do("LOCK late")
	if first.Kind != "OK" {
		t.Fatal(first.Line)
	}
	_, granted := waiter.Send("LOCK late wait=10s")
	awaitLending(t, a.Agent, "late", "run") // the run is made
	holder.Do("UNLOCK late")
	r := waiter.Await(granted)
	if r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	// The waiter's fence is the first of the run's block (the hand-overs,
	// and the holder's), so a majority of the masters count at its end; a
	// release and a new grant would have left them at the waiter's fence.
	// (The block starts past the holder's fence on the majority that
	// reserved it: one past it, unless the masters' first fences straddled
	// a second.)
	top := r.Int("fence") + int64(a.Config.Lock.CohortMaxHandoffs)
	atTop := 0
	for _, s := range servers {
		if v, err := s.Do("GET", a.Config.Lock.KeyPrefix+"{late}:fence"); err == nil && v == strconv.FormatInt(top, 10) {
			atTop++
		}
	}
	if r.Int("fence") <= first.Int("fence") || atTop < 2 {
		t.Fatalf("the waiter got fence %d after %d, and %d masters count at the run's block end %d: not passed the name in a run", r.Int("fence"), first.Int("fence"), atTop, top)
	}
}

// TestALocalWaiterBehindALentLockIsPassedTheName: a lock lent from its
// name's cache, with a local waiter behind it, turns the cache into a run
// (runFromCacheLocked): the release passes the name to the waiter with the
// next fence of the cache's block, where ending the cache in the masters
// and a new grant there would have given one past the block.
func TestALocalWaiterBehindALentLockIsPassedTheName(t *testing.T) {
	a, _ := start(t, nil)
	path := a.Config.Socket.Path
	holder, waiter := agenttest.Dial(t, path), agenttest.Dial(t, path)
	for range 2 { // a name in use again is cached at its release
		if r := holder.Do("LOCK lent"); r.Kind != "OK" {
			t.Fatal(r.Line)
		}
		holder.Do("UNLOCK lent")
	}
	lent := holder.Do("LOCK lent")
	if lent.Kind != "OK" {
		t.Fatal(lent.Line)
	}
	_, granted := waiter.Send("LOCK lent wait=10s")
	awaitLending(t, a.Agent, "lent", "run")
	holder.Do("UNLOCK lent")
	r := waiter.Await(granted)
	if r.Kind != "OK" || r.Int("fence") != lent.Int("fence")+1 {
		t.Fatalf("the waiter: %s after the lent fence %d, want the next fence of the cache's block", r.Line, lent.Int("fence"))
	}
	if r := waiter.Do("WHO lent"); len(r.Data) == 0 || r.Data[0]["fence"] != strconv.FormatInt(lent.Int("fence")+1, 10) {
		t.Fatalf("WHO after the hand-over: %v", r.Data) // (a waiting record may follow the holder's)
	}
}

// awaitNoGoroutineIn waits until no goroutine of the test binary runs fn.
func awaitNoGoroutineIn(t *testing.T, fn string) {
	t.Helper()
	lockagenttest.Eventually(t, 5*time.Second, func() bool { return !bytes.Contains(allStacks(), []byte(fn)) },
		"a goroutine still in %s after 5s", fn)
}

// awaitLending waits until a lends name as how (see agent.Lending).
func awaitLending(t *testing.T, a *agent.Agent, name, how string) {
	t.Helper()
	lockagenttest.Eventually(t, 5*time.Second, func() bool { return agent.Lending(a, name) == how },
		"%s is not lent as a %q after 5s", name, how)
}

// allStacks is every goroutine's stack, as runtime.Stack gives it.
func allStacks() []byte {
	for buf := make([]byte, 1<<20); ; buf = make([]byte, 2*len(buf)) {
		if n := runtime.Stack(buf, true); n < len(buf) {
			return buf[:n]
		}
	}
}
