package tests

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/agent"
	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// The same checkers as over three masters (kinds_chaos_test.go,
// cohort_test.go, dataloss_test.go), over five masters with at most two
// out at once, and over one master, which tolerates no failure.

// fiveMastersTwoOut: five masters, never more than two out at once (see
// failTwoOfFive).
var fiveMastersTwoOut = masterFaults{5, failTwoOfFive}

// oneMasterFailing: one master, paused now and then and now and then
// restarted empty (see failTheOnlyMaster).
var oneMasterFailing = masterFaults{1, failTheOnlyMaster}

// failTwoOfFive takes out at most two masters at once, until stop (and
// for two rounds at least, so that a short run has both kinds of fault):
// in turn two paused, one paused while another restarts empty, and one
// paused. Each fault lasts until the agents see it (and then 0.3–0.9 s);
// the next starts only once they see every master up again, a restarted
// one out of its quarantine: a quarantined master does not vote, so it
// counts as out.
func failTwoOfFive(servers []*redistest.Server, seen watch, stop time.Time, rng *rand.Rand) {
	for round := 0; round < 2 || time.Now().Before(stop); round++ {
		picked := rng.Perm(len(servers))[:2]
		paused := picked[:1+(round+2)%3/2] // two in the first of every three rounds
		for _, i := range paused {
			servers[i].Pause()
		}
		bit := seen(fmt.Sprintf("%d masters down", len(paused)), func(s map[string]string) bool { return mastersIn(s, "down") == len(paused) })
		if bit && round%3 == 1 {
			bit = restartAndSee(servers, picked[1], seen)
		}
		if bit {
			time.Sleep(time.Duration(300+rng.IntN(600)) * time.Millisecond)
		}
		for _, i := range paused {
			servers[i].Resume()
		}
		if !allUp(servers, seen) || !bit {
			return
		}
		time.Sleep(time.Duration(100+rng.IntN(200)) * time.Millisecond)
	}
}

// failTheOnlyMaster fails the one master until stop (and for two rounds
// at least): every third round, from the first, restarted empty, so that
// it sits out its quarantine, and else paused for 0.3–0.9 s from when the
// agents see it down. The next fault starts once the agents see it vote
// again.
func failTheOnlyMaster(servers []*redistest.Server, seen watch, stop time.Time, rng *rand.Rand) {
	for round := 0; round < 2 || time.Now().Before(stop); round++ {
		bit := true
		if round%3 == 0 {
			bit = restartAndSee(servers, 0, seen)
		} else {
			servers[0].Pause()
			if bit = seen("the master down", func(s map[string]string) bool { return s["m0"] == "down" }); bit {
				time.Sleep(time.Duration(300+rng.IntN(600)) * time.Millisecond)
			}
			servers[0].Resume()
		}
		if !allUp(servers, seen) || !bit {
			return
		}
		time.Sleep(time.Duration(100+rng.IntN(200)) * time.Millisecond)
	}
}

// restartAndSee restarts master i with no data, and waits until the agents
// see it out of the vote (in quarantine).
func restartAndSee(servers []*redistest.Server, i int, seen watch) bool {
	servers[i].Restart()
	name := fmt.Sprintf("m%d", i)
	return seen(name+" restarted empty, in quarantine", func(s map[string]string) bool { return s[name] != "up" })
}

// allUp waits until the agents see every master vote.
func allUp(servers []*redistest.Server, seen watch) bool {
	return seen("every master up", func(s map[string]string) bool { return mastersIn(s, "up") == len(servers) })
}

// countLost is how many of held ended by a LOST.
func countLost(held []kindHold) int {
	n := 0
	for _, h := range held {
		if h.lost {
			n++
		}
	}
	return n
}

// TestFiveMastersMutexWithTwoOut: one name, clients on two agents, five
// masters, two of them out at a time: no two holds overlap, fences grow.
func TestFiveMastersMutexWithTwoOut(t *testing.T) {
	t.Parallel()
	held := kindsUnderFaults(t, fiveMastersTwoOut, "five", 6, func(int, *rand.Rand) string { return "LOCK five" })
	if err := checkHolds(held, "five", 1); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d holds (%d lost) over five masters, two out at a time: no overlap, fences grow", len(held), countLost(held))
}

// TestFiveMastersSemaphoreWithTwoOut: limit=2 for five clients, five
// masters, two of them out at a time.
func TestFiveMastersSemaphoreWithTwoOut(t *testing.T) {
	t.Parallel()
	held := kindsUnderFaults(t, fiveMastersTwoOut, "sem5", 5, func(int, *rand.Rand) string { return "LOCK sem5 limit=2" })
	if err := checkHolds(held, "sem5", 2); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d semaphore holds (%d lost) over five masters, two out at a time: at most 2 at once, one per slot", len(held), countLost(held))
}

// TestFiveMastersFairQueueWithTwoOut: fair readers and writers and plain
// writers, five masters, two of them out at a time.
func TestFiveMastersFairQueueWithTwoOut(t *testing.T) {
	t.Parallel()
	held := kindsUnderFaults(t, fiveMastersTwoOut, "fair5", 6, func(client int, rng *rand.Rand) string {
		switch rng.IntN(3) {
		case 0:
			return "LOCK fair5 fair=true"
		case 1:
			return "LOCK fair5 fair=true mode=shared"
		}
		return "LOCK fair5"
	})
	if err := checkHolds(held, "fair5", 1); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d holds (%d lost) with a fair queue over five masters, two out at a time: no exclusive overlap", len(held), countLost(held))
}

// TestFiveMastersCohortWithTwoOut: many clients of one agent and a few of
// another take turns, so that the first passes the name among its clients
// (cohort hand-overs, from fence blocks reserved on the masters), five
// masters, two of them out at a time.
func TestFiveMastersCohortWithTwoOut(t *testing.T) {
	t.Parallel()
	// A lease of 3s: a record is lent only while it is valid for half a
	// lease (agent/locks/lend.go), and with 1s a starved host (the suite
	// beside two CPU hogs) passed nothing on at all, its grants and
	// renewals over three masters of five taking more than 500ms: 19 grants
	// and no hand-over in the 4s window in one soak run, 27 and none in
	// another even with the window extended. With 3s a quarantine and a
	// lost hold's record last longer, so the window goes on until 20 grants
	// (a quiet CI once made 8 in 4s): slow, not wedged.
	//
	// A run ends at the first release after cohort_max_hold (20 ms by
	// default) once the other agent's waiter says it waits, and holds here
	// last up to 30 ms: on a starved host that word came before every
	// first release, and a soak run made 26 grants and no hand-over, as
	// the fairness rule says it must. The run here may go on for 300 ms
	// though the other agent waits: the test is of runs over five masters,
	// not of that rule (TestRemoteWaiterServedWithinTheBound is).
	a, b, servers := twoAgentsSet(t, 5, 3*time.Second, func(l *agent.LockConfig) { l.CohortMaxHold = 300 * time.Millisecond })
	const local, remote = 6, 2
	held := cohortChurnAtLeast(t, a, b, servers, "cohort5", local, remote, 30*time.Millisecond, soak(4*time.Second, 8*time.Second), fiveMastersTwoOut.fail, 20)
	handOvers := checkExclusive(t, held, local)
	if len(held) < 20 || handOvers == 0 {
		t.Fatalf("only %d grants, %d hand-overs over five masters with two out", len(held), handOvers)
	}
	t.Logf("%d grants, %d hand-overs over five masters, two out at a time; no overlap, fences grow", len(held), handOvers)
}

// TestFiveMastersKeepAHoldWithTwoOut: what five masters buy over three.
// With two paused, a hold is renewed (no LOST), another agent's LOCK of its
// name is BUSY (not NO_QUORUM), and other names are granted. With one of
// them back, and once a renewal re-created the hold on it (its record
// expired while it was paused), another master restarts empty, forgetting
// the hold: still three of five keep it. Released, the name goes to the
// other agent with a greater fence.
func TestFiveMastersKeepAHoldWithTwoOut(t *testing.T) {
	t.Parallel()
	const lease = 2 * time.Second
	a, b, servers := twoAgentsOver(t, 5, lease)
	holder, other := agenttest.Dial(t, a.Config.Socket.Path), agenttest.Dial(t, b.Config.Socket.Path)
	if r := other.Do("STATUS"); r.Int("quorum") != 3 || r.Int("tolerates") != 2 {
		t.Fatalf("STATUS over five masters: %s", r.Line)
	}
	r := holder.Do("LOCK k")
	if r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	fence := r.Int("fence")
	seen := watchOf(t, a, b)
	servers[0].Pause()
	servers[1].Pause()
	seen("m0 and m1 down", func(s map[string]string) bool { return s["m0"] == "down" && s["m1"] == "down" })
	stillHeld(t, holder, other, "k", lease+lease/2)

	servers[1].Resume()
	lockagenttest.Eventually(t, 2*lease, func() bool { return servers[1].Keys("lock-agent:{k}:h:*") == 1 },
		"no renewal re-created the hold on m1 once it was back")
	servers[2].Restart()
	seen("m0 down and m2 in quarantine", func(s map[string]string) bool { return s["m0"] == "down" && s["m2"] == "quarantined" })
	stillHeld(t, holder, other, "k", lease+lease/2)

	servers[0].Resume()
	if r := holder.Do("UNLOCK k"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	if r := other.Do("LOCK k wait=5s"); r.Kind != "OK" || r.Int("fence") <= fence {
		t.Fatalf("after the holder's UNLOCK (fence %d), the other agent got %q", fence, r.Line)
	}
}

// stillHeld fails t if holder is told anything (a LOST) within d, or if,
// meanwhile, other is not refused name (BUSY) or not granted another name.
//
// The other agent's LOCK waits two seconds: a wait=0 LOCK is one round, which
// gives up on masters silent past its budget (a quarter lease, 500 ms
// here), and in a soak run the three masters left up were, for one round
// on a host short of CPU: with two out, that is NO_QUORUM by the rule
// (docs/protocol.md). A LOCK that waits is BUSY once any of its attempts
// heard from a majority, which is what five masters promise with two out.
func stillHeld(t *testing.T, holder, other *agenttest.Conn, name string, d time.Duration) {
	t.Helper()
	if r := other.Do("LOCK " + name + " wait=2s"); r.Kind != "BUSY" {
		t.Errorf("another agent's LOCK %s while it is held: %q, want BUSY", name, r.Line)
	}
	if r := other.Do("LOCK another"); r.Kind != "OK" {
		t.Errorf("LOCK of a free name: %q", r.Line)
	} else {
		other.Do("UNLOCK another")
	}
	if p := holder.Push(d); p != "" {
		t.Fatalf("the holder was told %q", p)
	}
}

// TestOneMasterMutexWhileItFails: one master, paused and restarted empty
// (the agents see each fault: watchOf fails the test if not): while it is
// out nothing is granted, and no two holds overlap and fences grow,
// across its quarantines too.
func TestOneMasterMutexWhileItFails(t *testing.T) {
	t.Parallel()
	held := kindsUnderFaults(t, oneMasterFailing, "one", 6, func(int, *rand.Rand) string { return "LOCK one" })
	if err := checkHolds(held, "one", 1); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d holds (%d lost) over one master paused and restarted: no overlap, fences grow", len(held), countLost(held))
}

// TestOneMasterSemaphoreWhileItFails: limit=2 over one failing master.
func TestOneMasterSemaphoreWhileItFails(t *testing.T) {
	t.Parallel()
	held := kindsUnderFaults(t, oneMasterFailing, "sem1", 5, func(int, *rand.Rand) string { return "LOCK sem1 limit=2" })
	if err := checkHolds(held, "sem1", 2); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d semaphore holds (%d lost) over one master paused and restarted", len(held), countLost(held))
}

// TestOneMasterRestartedEmptySitsOutItsQuarantine: one master restarted
// empty while a name is held forgets the hold. The holder is told LOST, and
// nothing is granted, every LOCK is answered NO_QUORUM, until the master
// has sat out its quarantine (one lease + drift): the price of no fault
// tolerance, and what keeps the hold safe. An agent started meanwhile (not
// bootstrapped) waits it out too. Then the name is granted again, to
// nobody before the holder's LOST, with a greater fence.
func TestOneMasterRestartedEmptySitsOutItsQuarantine(t *testing.T) {
	t.Parallel() // see TestMain
	a, b, late, servers := dataLossAgentsOver(t, 1, time.Second, time.Second)
	holder, probe := agenttest.Dial(t, a.Config.Socket.Path), agenttest.Dial(t, b.Config.Socket.Path)
	if r := probe.Do("STATUS"); r.Int("quorum") != 1 || r.Int("tolerates") != 0 {
		t.Fatalf("STATUS over one master: %s", r.Line)
	}
	r := holder.Do("LOCK k")
	if r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	fence := r.Int("fence")
	restarted := time.Now()
	servers[0].Restart()
	c := agenttest.StartNoWait(t, late)
	cs := contend(t, "k", b.Config.Socket.Path, b.Config.Socket.Path, c.Config.Socket.Path)
	if r := noQuorumInQuarantine(probe); r.Code != "NO_QUORUM" {
		t.Errorf("LOCK of a free name while the only master is in quarantine: %q, want NO_QUORUM", r.Line)
	}
	p := holder.Push(3 * time.Second)
	end := time.Now()
	if !strings.HasPrefix(p, "* LOST k ") {
		t.Fatalf("holder heard %q after its only master restarted empty", p)
	}
	cs.check(t, end, fence)
	first := cs.grants[0].at
	for _, g := range cs.grants[1:] {
		if g.at.Before(first) {
			first = g.at
		}
	}
	if q := agent.Quarantine(a.Config.Lock); first.Sub(restarted) < q {
		t.Fatalf("granted %v after the master restarted empty, within its quarantine of %v", first.Sub(restarted), q)
	}
	t.Logf("holder told %q; first grant %v after the restart", p, first.Sub(restarted).Round(time.Millisecond))
}

// noQuorumInQuarantine waits (up to 3 s) until c's agent sees its only
// master in quarantine, and answers a LOCK of a free name, wait=0, then.
func noQuorumInQuarantine(c *agenttest.Conn) agenttest.Reply {
	if !pollFor(3*time.Second, 10*time.Millisecond, func() bool { return statesOf(c)["m0"] == "quarantined" }) { // polling STATUS
		return agenttest.Reply{Line: "(the master was never seen in quarantine)"}
	}
	return c.Do("LOCK free wait=0")
}
