package tests

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/faultproxy"
	"github.com/lock-agent/lock-agent/internal/history"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// electionLease is the agents' lease in the election tests: the failover
// after a dead agent or one cut off takes about this long.
const electionLease = time.Second

// electionMustSee is the shortest term every observer must see. An agent
// pushes the leader it learns of from the masters' release and grant
// messages; when a message is lost (a link cut, a master restarted) its
// timer fallback, as for waiters, is at most the holder's remaining lease.
// A term that lasts a lease and a half is therefore seen by every observer
// that watched it all that time, whatever was lost; a shorter one may be
// replaced before a fallback reads it. Every term of TestElectionHistory
// lasts longer (see electionHold), so the rule reaches them all.
const electionMustSee = electionLease + electionLease/2

// electionHold is how long the run lets a leader lead before it ends its
// term (by resigning, or by a fault).
func electionHold(rng *rand.Rand) time.Duration {
	return between(rng, electionMustSee+100*time.Millisecond, electionMustSee+500*time.Millisecond)
}

// electionCluster is two real agents over three real masters, each agent
// reaching each master through a link of its own.
func electionCluster(t testing.TB, servers []*redistest.Server) (string, []*agentProc) {
	bin := binary(t)
	agents := []*agentProc{
		newAgentProc(t, "elect-a", servers, electionLease), newAgentProc(t, "elect-b", servers, electionLease),
	}
	bootstrap(t, bin, agents[0].cfgPath)
	for _, a := range agents {
		a.start(t, bin)
	}
	return bin, agents
}

// TestElectionHistory is the election of coordination.md §2 under faults:
// 5 candidates (real processes) on 2 real agents, 2 observers on each
// agent, while the masters are paused at random (one at a time); in turn
// the leader resigns, its process is killed with kill -9, its agent is
// killed with kill -9 (and restarted, as a supervisor would), and its
// agent is cut off from every master (and healed once another is elected).
// The history must keep every rule of history.CheckElection: terms never
// overlap and grow, every observer sees every term it watched for
// electionMustSee in increasing order and nothing older after newer.
// Every end of a term twice by default (about 18 s: 8 terms, what the run
// must reach); LOCK_AGENT_SOAK=1 goes on for 10 minutes.
func TestElectionHistory(t *testing.T) {
	t.Parallel() // see TestMain
	servers := redistest.Start(t, 3)
	bin, agents := electionCluster(t, servers)
	e := newElection(t, "elect/leader", agents)
	for i := range 5 {
		e.campaign(agents[i%2])
	}
	for range 2 {
		e.observe(agents[0])
		e.observe(agents[1])
	}
	stopPauses := pauseMastersAtRandom(e.h, servers, rand.New(rand.NewPCG(partitionSeed(t), 2)))
	rng := rand.New(rand.NewPCG(partitionSeed(t), 1))
	runFor := soak(0, 10*time.Minute)
	if deadline, ok := t.Deadline(); ok {
		runFor = min(runFor, max(time.Until(deadline)-time.Minute, 0)) // a soak within -timeout
	}
	phases := 2 * len(electionFaults)
	var failovers [4][]time.Duration
	began := time.Now()
	for phase := 0; ; phase++ {
		leader := e.awaitLeader(10 * time.Second)
		if phase >= phases && time.Since(began) > runFor {
			break
		}
		time.Sleep(electionHold(rng)) // the workload: the leader leads this long
		// The term may have changed hands meanwhile (a LOST while masters
		// are paused at random, beside two hogs): the fault ends the
		// current one.
		leader = e.awaitLeader(10 * time.Second)
		took := electionFault(e, bin, phase%4, leader)
		failovers[phase%4] = append(failovers[phase%4], took)
	}
	stopPauses()
	events := e.stop()
	r := history.CheckElection(events, progressWindow, electionMustSee)
	terms, pushes := electionCounts(events)
	t.Logf("history of %d events: %d terms, %d pushes to %d observer sessions, %d lost",
		r.Events, terms, pushes, len(history.Observations(events)), r.Lost)
	for i, what := range electionFaults {
		t.Logf("failover after %s: %v", what, roundAll(failovers[i]))
	}
	lags := history.ObserverLags(e.seeing(events))
	t.Logf("observer lag over %d changes: p50 %v p99 %v max %v", len(lags), pct(lags, 50), pct(lags, 99), pct(lags, 100))
	if err := r.Err(); err != nil {
		t.Fatalf("%v\n(the whole history: %s)", err, dumpHistory(t, events))
	}
	if terms < 8 || pushes < terms {
		t.Fatalf("%d terms and %d pushes: the run did not reach what it is for", terms, pushes)
	}
}

// electionFaults are the ends of a term, in the order the run goes
// through them.
var electionFaults = []string{"resign", "kill -9 of the leader", "kill -9 of its agent", "its masters cut off"}

// electionFault ends the leader's term by fault i of electionFaults and
// returns how long after it the next leader read its OK. The next term is
// the first with a fence above every one read before the fault: leader's
// term may have ended by a LOST just before it, and the next one begun,
// before the test read either (a soak run beside two hogs faulted a leader
// that had lost its term, and then waited 10s for a grant after the fault
// while the new leader held on: "no new term within 10s").
func electionFault(e *election, bin string, i int, leader *candidate) time.Duration {
	top := e.topFence()
	var at time.Duration
	switch i {
	case 0:
		at = history.Stamp()
		leader.resign()
	case 1:
		at = leader.kill()
		e.campaign(leader.agent) // its place, as a supervisor restarts it
	case 2:
		at = leader.agent.kill()
		e.info(at, "kill -9 of agent "+leader.agent.id)
		defer e.restart(bin, leader.agent)
	case 3:
		at = history.Stamp()
		e.info(at, "agent "+leader.agent.id+" cut off")
		e.blindAt(leader.agent)
		leader.agent.cut(faultproxy.Cut)
		defer func() { leader.agent.cut(faultproxy.Pass); e.info(history.Stamp(), "agent "+leader.agent.id+" healed") }()
	}
	return max(e.awaitTermAbove(top, 10*time.Second)-at, 0)
}

// restart starts a killed agent again, with candidates and observers in
// place of those that died with it.
func (e *election) restart(bin string, a *agentProc) {
	e.t.Helper()
	a.start(e.t, bin)
	e.info(history.Stamp(), "agent "+a.id+" restarted")
	e.mu.Lock()
	have := 0
	for c := range e.cands {
		if c.agent == a {
			have++
		}
	}
	e.mu.Unlock()
	for range 3 - have {
		e.campaign(a)
	}
	for range 2 {
		e.observe(a)
	}
}

func (e *election) info(at time.Duration, what string) {
	e.h.AddStamped(history.Event{Type: history.Info, Detail: what}, at)
}

// blindAt marks the observers now on agent a: it is being cut off, so
// they cannot hear of a change until it heals, and their lags are left
// out (their misses are not: see electionMustSee).
func (e *election) blindAt(a *agentProc) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for o := range e.obs {
		if o.agent == a {
			e.blind[o.id] = true
		}
	}
}

// seeing is events without those of observers that were cut off.
func (e *election) seeing(events []history.Event) []history.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(events), func(ev history.Event) bool { return e.blind[ev.Client] })
}

// pauseMastersAtRandom pauses one master at a time, at random, for 20-300 ms
// with 100-1000 ms between pauses, until the returned func is called.
func pauseMastersAtRandom(h *history.History, servers []*redistest.Server, rng *rand.Rand) (stop func()) {
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			s := servers[rng.IntN(len(servers))]
			select {
			case <-done:
				return
			case <-time.After(between(rng, 100*time.Millisecond, time.Second)):
			}
			h.Add(history.Event{Type: history.Info, Detail: "pause " + s.Addr})
			s.Pause()
			select {
			case <-done:
			case <-time.After(between(rng, 20*time.Millisecond, 300*time.Millisecond)):
			}
			s.Resume()
			h.Add(history.Event{Type: history.Info, Detail: "resume " + s.Addr})
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done); <-stopped }) }
}

// between is a random duration in [lo, hi).
func between(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rng.Int64N(int64(hi-lo)))
}

func electionCounts(events []history.Event) (terms, pushes int) {
	for _, e := range events {
		switch e.Type {
		case history.OK:
			terms++
		case history.Leader:
			pushes++
		}
	}
	return terms, pushes
}

// pct is the p-th percentile of ds by nearest rank (100: the largest), 0
// when ds is empty.
func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(ds))
	return s[max(0, (len(s)*p+99)/100-1)].Round(10 * time.Microsecond)
}

func roundAll(ds []time.Duration) string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond).String()
	}
	return fmt.Sprint(out)
}

// TestElectionCheckerCatchesSplitBrain shows the election's checker fails
// when the system is broken: two agents misconfigured with disjoint
// masters (each believes its three are all there are) each elect a leader
// at once, and each agent's observers never hear of the other's. The
// history of that real run must break "overlap" (two leaders at once),
// and an observer rule: "observer-missed" (the other side's term never
// pushed) or, when both sides' fences happen to be equal (masters
// bootstrapped in the same second count alike), "observer-value" (the
// other side's fence pushed with this side's value).
func TestElectionCheckerCatchesSplitBrain(t *testing.T) {
	t.Parallel() // see TestMain
	servers := redistest.Start(t, 6)
	bin := binary(t)
	agents := []*agentProc{
		newAgentProc(t, "split-a", servers[:3], electionLease), newAgentProc(t, "split-b", servers[3:], electionLease),
	}
	for _, a := range agents {
		bootstrap(t, bin, a.cfgPath)
		a.start(t, bin)
	}
	e := newElection(t, "elect/split", agents)
	for _, a := range agents {
		e.campaign(a)
		e.campaign(a)
		e.observe(a)
	}
	e.await(10*time.Second, "two leaders", func() bool { return len(e.grants) >= 2 })
	time.Sleep(electionMustSee + 500*time.Millisecond) // both lead long enough that observers must see them
	events := e.stop()
	r := history.CheckElection(events, progressWindow, electionMustSee)
	broken := map[string]bool{}
	for _, v := range r.Violations {
		broken[v.Rule] = true
	}
	if !broken["overlap"] || !broken["observer-missed"] && !broken["observer-value"] {
		t.Fatalf("the checker passed a split brain (broke %v): %v\n%s", broken, r.Err(), dumpHistory(t, events))
	}
	t.Logf("caught, as it must be: %v", r.Err())
}

// TestElectionRapidTurns: two candidates on one agent hand the leadership
// back and forth as fast as they can (each resigns, and campaigns again at
// once, 300 times), with two observers on that agent and two on another.
// Every grant is read by its candidate here (nothing is killed), so beyond
// history.CheckElection every fence pushed must be one a candidate was
// granted (history.Phantoms); every 50th term lasts electionMustSee, which
// every observer must then see. After each grant is read, a fresh session
// on one agent or the other asks who leads (OBSERVE, its first push): it
// must not be answered with the term before, or none (observer-stale).
func TestElectionRapidTurns(t *testing.T) {
	t.Parallel()
	servers := redistest.Start(t, 3)
	agents := []*agentProc{inProcessAgent(t, "rapid-a", servers), inProcessAgent(t, "rapid-b", servers)}
	e := newElection(t, "elect/rapid", agents)
	e.campaign(agents[0])
	e.campaign(agents[0])
	for range 2 {
		e.observe(agents[0])
		e.observe(agents[1])
	}
	for i := range 300 {
		leader := e.awaitLeader(10 * time.Second)
		if i%50 == 49 {
			time.Sleep(electionMustSee + 100*time.Millisecond) // long enough that every observer must see it
		}
		at := history.Stamp()
		leader.resign()
		e.awaitGrantAfter(at, 10*time.Second)
		e.ask(agents[i%2])
	}
	events := e.stop()
	r := history.CheckElection(events, progressWindow, electionMustSee)
	r.Violations = append(r.Violations, history.Phantoms(events)...)
	terms, pushes := electionCounts(events)
	lags := history.ObserverLags(events)
	t.Logf("%d terms, %d pushes; observer lag over %d changes: p50 %v p99 %v max %v",
		terms, pushes, len(lags), pct(lags, 50), pct(lags, 99), pct(lags, 100))
	if err := r.Err(); err != nil {
		t.Fatalf("%v\n(the whole history: %s)", err, dumpHistory(t, events))
	}
}
