package agent_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/agent"
	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/agenttest"
)

// TestANameLeavesNoRecordOnceNothingOfItIsLeft takes a name through one
// part of its record at a time (so that each part is the last to let go in
// one case), lets it end, and finds that the agent keeps no record of any
// name after.
func TestANameLeavesNoRecordOnceNothingOfItIsLeft(t *testing.T) {
	a, _ := start(t, func(c *agent.Config) { c.Lock.CacheLinger = 100 * time.Millisecond })
	c1 := agenttest.Dial(t, a.Config.Socket.Path)
	c2 := agenttest.Dial(t, a.Config.Socket.Path)
	var t1 *testing.T // the running case
	do := func(c *agenttest.Conn, line string) agenttest.Reply {
		t := t1
		t.Helper()
		r := c.Do(line)
		if r.Kind != "OK" {
			t.Fatalf("%s: %s", line, r.Line)
		}
		return r
	}
	push := func(c *agenttest.Conn, want string) {
		t := t1
		t.Helper()
		if p := c.Push(5 * time.Second); !strings.Contains(p, want) {
			t.Fatalf("push %q, want %s", p, want)
		}
	}
	for i, tc := range []struct {
		name string
		use  func(name string)
	}{
		{"a lock held and let go", func(n string) {
			do(c1, "LOCK "+n)
			do(c1, "UNLOCK "+n)
		}},
		{"a notify=wanted hold that heard of a waiter", func(n string) {
			do(c1, "LOCK "+n+" notify=wanted")
			_, waiting := c2.Send("LOCK " + n + " mode=shared wait=100ms") // not passed the name: no run
			push(c1, "WANTED "+n)
			c2.Await(waiting)
			awaitNoGoroutineIn(t1, "recordWaiting") // the hold is the last of the name
			awaitNoGoroutineIn(t1, "(*Agent).contend")
			do(c1, "UNLOCK "+n)
		}},
		{"a waiter recorded on the masters that was cancelled", func(n string) {
			do(c1, "LOCK "+n)
			tag, waiting := c2.Send("LOCK " + n)
			c1.AwaitWaiters(1)
			lockagenttest.Eventually(t1, 5*time.Second, func() bool { return c1.Do("WHO "+n).Int("waiting") == 1 },
				"the waiter is not recorded on the masters")
			do(c2, "CANCEL "+tag)
			do(c1, "UNLOCK "+n)
			if r := c2.Await(waiting); r.Kind == "OK" { // the CANCEL came after the hand-over
				do(c2, "UNLOCK "+n)
			}
		}},
		{"a run of local holders", func(n string) {
			do(c1, "LOCK "+n)
			_, waiting := c2.Send("LOCK " + n)
			c1.AwaitWaiters(1)
			lockagenttest.Eventually(t1, 5*time.Second, func() bool { return c1.Do("WHO "+n).Int("waiting") == 1 },
				"the waiter is not recorded on the masters")
			do(c1, "UNLOCK "+n)
			if r := c2.Await(waiting); r.Kind != "OK" {
				t1.Fatalf("the waiter: %s", r.Line)
			}
			awaitNoGoroutineIn(t1, "recordWaiting") // the run is the last of the name
			do(c2, "UNLOCK "+n)
		}},
		{"a cache that lingered", func(n string) {
			for _, line := range []string{"LOCK ", "UNLOCK ", "LOCK ", "UNLOCK "} { // used again: cached
				do(c1, line+n)
			}
		}},
		{"an observation", func(n string) {
			do(c1, "OBSERVE "+n)
			push(c1, "LEADER "+n)
			do(c1, "UNOBSERVE "+n)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t1 = t
			tc.use(fmt.Sprintf("rec/%d", i))
			var names []string
			lockagenttest.Eventually(t, 10*time.Second, func() bool { names = agent.Names(a.Agent); return len(names) == 0 },
				"the agent keeps records of names once nothing of them is left: %q", &names)
		})
	}
}
