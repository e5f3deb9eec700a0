package tests

import (
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/agent"
	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/agenttest"
)

// whoWaits is WHO name's waiting lines as "agent=count" in order, and its
// final line's waiting=.
func whoWaits(t *testing.T, c *agenttest.Conn, name string) (string, int64) {
	t.Helper()
	r := c.Do("WHO " + name)
	if r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	var lines []string
	for _, d := range r.Data {
		if _, holder := d["pid"]; holder {
			continue
		}
		if d["since"] == "" || d["count"] == "" {
			t.Fatalf("a waiting line without since= or count=: %v", d)
		}
		lines = append(lines, d["agent"]+"="+d["count"])
	}
	slices.Sort(lines)
	return strings.Join(lines, " "), r.Int("waiting")
}

// awaitWho waits until WHO name on c lists the waiting agents want (as
// whoWaits gives them) with waiting=total, within d.
func awaitWho(t *testing.T, c *agenttest.Conn, name, want string, total int64, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	var got string
	var n int64
	lockagenttest.Eventually(t, d, func() bool {
		got, n = whoWaits(t, c, name)
		return got == want && n == total
	}, "WHO %s lists %q, waiting=%d (want %q, waiting=%d)", name, &got, &n, want, total)
	return time.Since(start)
}

// TestWhoListsTheWaitersOfBothAgents: WHO on either agent lists each
// agent's waiting requests for a name with their count, and the total;
// the lists shrink as waiters leave, a master paused changes nothing, and
// a stopped agent's record goes.
func TestWhoListsTheWaitersOfBothAgents(t *testing.T) {
	t.Parallel() // see TestMain
	const lease = time.Second
	a, b, servers := twoAgents(t, lease)
	holder := agenttest.Dial(t, a.Config.Socket.Path)
	if r := holder.Do("LOCK n"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	if got, n := whoWaits(t, holder, "n"); got != "" || n != 0 {
		t.Fatalf("WHO before anyone waits: %q waiting=%d", got, n)
	}
	onA := agenttest.Dial(t, a.Config.Socket.Path)
	onB := agenttest.Dial(t, b.Config.Socket.Path)
	var tagsA []string
	var chansA []<-chan agenttest.Reply
	for i := range 2 {
		tag, ch := onA.Send(fmt.Sprintf("LOCK n owner=w%d wait=30s", i))
		tagsA, chansA = append(tagsA, tag), append(chansA, ch)
	}
	tagB, chB := onB.Send("LOCK n wait=30s")
	awaitWho(t, holder, "n", "host-a=2 host-b=1", 3, 5*time.Second)
	// The same on the other agent (on a connection of its own: a WHO
	// waits for its connection's LOCKs of the name to be answered).
	whoB := agenttest.Dial(t, b.Config.Socket.Path)
	awaitWho(t, whoB, "n", "host-a=2 host-b=1", 3, time.Second)

	servers[0].Pause()
	awaitWho(t, whoB, "n", "host-a=2 host-b=1", 3, 5*time.Second)
	servers[0].Resume()

	cancelWait(t, onA, tagsA[0], chansA[0])
	awaitWho(t, holder, "n", "host-a=1 host-b=1", 2, 5*time.Second)
	cancelWait(t, onB, tagB, chB)
	awaitWho(t, holder, "n", "host-a=1", 1, 5*time.Second)

	// An agent stopped with a waiter: its waiter is answered, and its
	// record goes.
	onB.Send("LOCK n wait=30s")
	awaitWho(t, holder, "n", "host-a=1 host-b=1", 2, 5*time.Second)
	b.Stop()
	awaitWho(t, holder, "n", "host-a=1", 1, 3*lease)

	if r := holder.Do("UNLOCK n"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	if r := onA.Await(chansA[1]); r.Kind != "OK" {
		t.Fatalf("the last waiter: %s", r.Line)
	}
	awaitWho(t, holder, "n", "", 0, 5*time.Second)
}

// TestWhoDoesNotListARequestGrantedAtOnce: a LOCK of a free name is never
// recorded as waiting, and WHO of a name nobody waits for says waiting=0.
func TestWhoDoesNotListARequestGrantedAtOnce(t *testing.T) {
	a, _, servers := twoAgents(t, time.Second)
	c := agenttest.Dial(t, a.Config.Socket.Path)
	for i := range 20 {
		if r := c.Do(fmt.Sprintf("LOCK free%d", i)); r.Kind != "OK" {
			t.Fatal(r.Line)
		}
	}
	if got, n := whoWaits(t, c, "free3"); got != "" || n != 0 {
		t.Fatalf("WHO of a name granted at once: %q waiting=%d", got, n)
	}
	for _, s := range servers {
		if k := s.Keys("*:w*"); k != 0 {
			t.Fatalf("%d waiting keys written for LOCKs granted at once", k)
		}
	}
}

// TestWhoForgetsAKilledAgentsWaitersWithinItsLease: the waiting record of
// an agent killed with a waiter (it removes nothing) lapses within its
// lease.
func TestWhoForgetsAKilledAgentsWaitersWithinItsLease(t *testing.T) {
	const lease = time.Second
	cmd, _, _, sock, servers := binaryAgent(t, fmt.Sprintf("lock {\n  lease = %q\n}\n", lease))
	cfg := agenttest.Config(t, servers, lease)
	cfg.AgentID = "survivor"
	cfg.Lock.MaxTTL = agent.Default().Lock.MaxTTL // the binary agent's settings, which the masters record
	a := agenttest.Start(t, cfg)
	holder := agenttest.Dial(t, a.Config.Socket.Path)
	if r := holder.Do("LOCK k"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	agenttest.Dial(t, a.Config.Socket.Path).Send("LOCK k wait=30s")
	doomed := agenttest.Dial(t, sock)
	doomed.Send("LOCK k wait=30s")
	var got string
	lockagenttest.Eventually(t, 5*time.Second, func() bool {
		got, _ = whoWaits(t, holder, "k")
		return strings.Count(got, "=1") == 2
	}, "WHO never listed both agents' waiters: %q", &got)

	cmd.Process.Signal(syscall.SIGKILL)
	killed := time.Now()
	awaitWho(t, holder, "k", "survivor=1", 1, 3*lease)
	took := time.Since(killed)
	t.Logf("a killed agent's waiting record gone from WHO %v after the kill (lease %v)", took, lease)
	if took > lease+lease/2 {
		t.Fatalf("the killed agent's record stayed %v, more than its lease %v", took, lease)
	}
}

// TestWhoWaitingRecordsComeBackAfterTheMastersLoseThem: records deleted on
// every master are written anew once the renewal finds them gone, though
// no waiter came or left.
func TestWhoWaitingRecordsComeBackAfterTheMastersLoseThem(t *testing.T) {
	const lease = time.Second
	a, b, servers := twoAgents(t, lease)
	holder := agenttest.Dial(t, a.Config.Socket.Path)
	if r := holder.Do("LOCK n"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	agenttest.Dial(t, b.Config.Socket.Path).Send("LOCK n wait=30s")
	awaitWho(t, holder, "n", "host-b=1", 1, 5*time.Second)
	// DEL's counts say the record was on a majority and is gone; a KEYS
	// after it raced the renewal that writes it anew, what this test waits
	// for (a soak run: "2 waiting keys left after DEL").
	had := 0
	for _, s := range servers {
		n, err := s.Do("DEL", b.Config.Lock.KeyPrefix+"{n}:w", b.Config.Lock.KeyPrefix+"{n}:wd")
		if err != nil {
			t.Fatal(err)
		}
		if n == "2" {
			had++
		}
	}
	if had < 2 {
		t.Fatalf("the waiting record was on %d masters when deleted, want a majority", had)
	}
	took := awaitWho(t, holder, "n", "host-b=1", 1, 3*lease)
	t.Logf("the lost record is back in WHO after %v (renewals every %v)", took, lease/3)
}
