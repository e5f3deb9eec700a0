package tests

import (
	"bufio"
	"fmt"
	"net"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// leaderEvent is one * LEADER push as an observer saw it.
type leaderEvent struct {
	none         bool
	fence        int64
	value, agent string
	at           time.Time
}

func (e leaderEvent) String() string {
	if e.none {
		return "none"
	}
	return fmt.Sprintf("fence=%d value=%s agent=%s", e.fence, e.value, e.agent)
}

// parseLeader reads "* LEADER NAME none" or "* LEADER NAME fence=F value=V agent=A".
func parseLeader(line, name string) (leaderEvent, bool) {
	words := strings.Fields(line)
	if len(words) < 4 || words[1] != "LEADER" || words[2] != name {
		return leaderEvent{}, false
	}
	e := leaderEvent{at: time.Now()}
	if words[3] == "none" {
		e.none = true
		return e, len(words) == 4
	}
	for _, w := range words[3:] {
		k, v, _ := strings.Cut(w, "=")
		switch k {
		case "fence":
			e.fence, _ = strconv.ParseInt(v, 10, 64)
		case "value":
			e.value = v
		case "agent":
			e.agent = v
		}
	}
	return e, e.fence > 0
}

// observer records the * LEADER pushes of one name on one connection.
type observer struct {
	t       *testing.T
	name    string
	mu      sync.Mutex
	events  []leaderEvent
	changed chan struct{} // closed and replaced at each event
}

// observe sends OBSERVE name on c and records its pushes until the test ends.
func observe(t *testing.T, c *agenttest.Conn, name string) *observer {
	t.Helper()
	if r := c.Do("OBSERVE " + name); r.Kind != "OK" {
		t.Fatalf("OBSERVE %s: %s", name, r.Line)
	}
	o := &observer{t: t, name: name, changed: make(chan struct{})}
	done := make(chan struct{})
	stopped := make(chan struct{})
	t.Cleanup(func() { close(done); <-stopped })
	go func() {
		defer close(stopped)
		for {
			select {
			case p := <-c.Pushes():
				if e, ok := parseLeader(p, name); ok {
					o.add(e)
				} else if strings.HasPrefix(p, "* LEADER") {
					t.Errorf("malformed push: %q", p)
				}
			case <-done:
				return
			}
		}
	}()
	return o
}

func (o *observer) add(e leaderEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = append(o.events, e)
	close(o.changed)
	o.changed = make(chan struct{})
}

// await waits (up to timeout) until cond holds of the events so far.
func (o *observer) await(timeout time.Duration, cond func([]leaderEvent) bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		o.mu.Lock()
		ok, changed := cond(o.events), o.changed
		o.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-changed:
		case <-deadline.C:
			return false
		}
	}
}

// saw waits until the observer saw fence with value.
func (o *observer) saw(fence int64, value string, timeout time.Duration) bool {
	return o.await(timeout, func(es []leaderEvent) bool {
		return slices.ContainsFunc(es, func(e leaderEvent) bool { return !e.none && e.fence == fence && e.value == value })
	})
}

func (o *observer) snapshot() []leaderEvent {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.events)
}

// checkOrder fails if the observer saw a term after a newer one.
func (o *observer) checkOrder(who string) {
	top := int64(0)
	for i, e := range o.snapshot() {
		if e.none {
			continue
		}
		if e.fence < top {
			o.t.Errorf("%s: push %d is term %d after term %d: %v", who, i, e.fence, top, o.snapshot())
			return
		}
		top = e.fence
	}
}

// TestObserversSeeEveryTermInOrder: four candidates on two agents take
// turns (LOCK fair=true value=...), each proclaiming a new value once
// elected, while master 0 is paused for part of the run. Observers on
// both agents see every term and every value, never a term after a newer
// one, and none after the last resignation.
func TestObserversSeeEveryTermInOrder(t *testing.T) {
	t.Parallel() // see TestMain
	a, b, servers := twoAgents(t, 2*time.Second)
	obsA := observe(t, agenttest.Dial(t, a.Config.Socket.Path), "e")
	obsB := observe(t, agenttest.Dial(t, b.Config.Socket.Path), "e")
	for _, o := range []*observer{obsA, obsB} {
		if !o.await(5*time.Second, func(es []leaderEvent) bool { return len(es) > 0 }) || !o.snapshot()[0].none {
			t.Fatalf("first push of an unheld name: %v", o.snapshot())
		}
	}
	const candidates, terms = 4, 8
	var termsMu sync.Mutex
	elected := 0
	var wg sync.WaitGroup
	for i := range candidates {
		agent := a
		if i%2 == 1 {
			agent = b
		}
		c := agenttest.Dial(t, agent.Config.Socket.Path)
		wg.Go(func() {
			for k := range terms {
				value := fmt.Sprintf("c%d.%d", i, k)
				r := c.Do("LOCK e fair=true wait=30s value=" + value)
				if r.Kind != "OK" {
					t.Errorf("candidate %d: %s", i, r.Line)
					return
				}
				fence := r.Int("fence")
				for _, o := range []*observer{obsA, obsB} {
					if !o.saw(fence, value, 10*time.Second) {
						t.Errorf("candidate %d: term %d value %s never seen: %v", i, fence, value, o.snapshot())
					}
				}
				if r := c.Do("SET e value=" + value + "-set"); r.Kind != "OK" {
					t.Errorf("candidate %d: SET: %s", i, r.Line)
				}
				for _, o := range []*observer{obsA, obsB} {
					if !o.saw(fence, value+"-set", 10*time.Second) {
						t.Errorf("candidate %d: term %d's SET never seen: %v", i, fence, o.snapshot())
					}
				}
				termsMu.Lock()
				elected++
				termsMu.Unlock()
				c.Do("UNLOCK e")
			}
		})
	}
	count := func() int { termsMu.Lock(); defer termsMu.Unlock(); return elected }
	obsB.await(30*time.Second, func([]leaderEvent) bool { return count() >= candidates*terms/4 })
	servers[0].Pause()
	obsB.await(30*time.Second, func([]leaderEvent) bool { return count() >= candidates*terms/2 })
	servers[0].Resume()
	wg.Wait()
	for i, o := range []*observer{obsA, obsB} {
		if !o.await(10*time.Second, func(es []leaderEvent) bool { return len(es) > 0 && es[len(es)-1].none }) {
			t.Errorf("observer %d: no none after the last UNLOCK: %v", i, o.snapshot())
		}
		o.checkOrder(fmt.Sprintf("observer %d", i))
	}
	t.Logf("%d terms; pushes seen: %d on agent a, %d on agent b", count(), len(obsA.snapshot()), len(obsB.snapshot()))
}

// rawLines sends line on a raw connection and returns the first n lines back.
func rawLines(t *testing.T, path, line string, n int) (net.Conn, []string) {
	t.Helper()
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write([]byte(line + "\n")); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	var out []string
	for range n {
		l, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("after %q: %v (read %q)", line, err, out)
		}
		out = append(out, strings.TrimSuffix(l, "\n"))
	}
	return conn, out
}

// TestObserveAnswersOKThenTheCurrentLeader: OBSERVE's OK comes first,
// then the current leader, whether the agent had to read it (the first
// observer) or knew it (the second); UNOBSERVE ends the pushes, a closed
// session's observation is gone (the observers gauge), and once the last
// observer left, the agent's subscription is gone.
func TestObserveAnswersOKThenTheCurrentLeader(t *testing.T) {
	a, b, servers := twoAgents(t, 3*time.Second)
	holder := agenttest.Dial(t, b.Config.Socket.Path)
	first := holder.Do("LOCK o value=me")
	want := fmt.Sprintf("* LEADER o fence=%d value=me agent=host-b", first.Int("fence"))
	var raw []net.Conn
	for i := range 2 {
		conn, lines := rawLines(t, a.Config.Socket.Path, "t OBSERVE o", 2)
		if lines[0] != "t OK" || lines[1] != want {
			t.Fatalf("observer %d: %q, want OK then %q", i, lines, want)
		}
		raw = append(raw, conn)
	}
	staying := agenttest.Dial(t, a.Config.Socket.Path)
	stays := observe(t, staying, "o")
	leaves := agenttest.Dial(t, a.Config.Socket.Path)
	leaving := observe(t, leaves, "o")
	if !leaving.saw(first.Int("fence"), "me", 5*time.Second) {
		t.Fatalf("no current leader: %v", leaving.snapshot())
	}
	if r := leaves.Do("UNOBSERVE o"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	if r := leaves.Do("UNOBSERVE o"); r.Kind != "OK" { // not observed: still OK
		t.Fatal(r.Line)
	}
	holder.Do("SET o value=next")
	if !stays.saw(first.Int("fence"), "next", 5*time.Second) {
		t.Fatalf("the SET never reached the observer that stayed: %v", stays.snapshot())
	}
	if es := leaving.snapshot(); len(es) != 1 {
		t.Fatalf("pushes after UNOBSERVE: %v", es)
	}
	if got := metric(t, a, "lock_agent_observers"); got != 3 { // two raw sessions and stays
		t.Fatalf("observers gauge %v, want 3", got)
	}
	channel := a.Config.Lock.KeyPrefix + "{o}:released"
	if got := numsub(t, servers[0], channel); got != 1 {
		t.Fatalf("%d subscriptions while observed", got)
	}
	for _, c := range raw {
		c.Close()
	}
	staying.Close()
	var observers float64
	lockagenttest.Eventually(t, 5*time.Second, func() bool { observers = metric(t, a, "lock_agent_observers"); return observers == 0 },
		"observers gauge %v after every observer closed", &observers)
	for i, s := range servers {
		var subs int
		lockagenttest.Eventually(t, 5*time.Second, func() bool { subs = numsub(t, s, channel); return subs == 0 },
			"master %d: %d subscriptions after the last observer left", i, &subs)
	}
}

// metric reads one unlabelled series of agent a's metrics.
func metric(t testing.TB, a *agenttest.Agent, name string) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	a.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	total, found := 0.0, false
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if series, v, ok := strings.Cut(line, " "); ok && (series == name || strings.HasPrefix(series, name+"{")) {
			f, _ := strconv.ParseFloat(v, 64)
			total, found = total+f, true
		}
	}
	if !found {
		t.Fatalf("no series %s", name)
	}
	return total
}

// awaitSubscribed waits until each of servers has a subscriber to name's
// release channel: a parked waiter's subscriptions are confirmed, and an
// UNLOCK from now on wakes it by its message, not by a retry.
func awaitSubscribed(t testing.TB, servers []*redistest.Server, name string) {
	t.Helper()
	channel := "lock-agent:{" + name + "}:released"
	for i, s := range servers {
		var subs int
		lockagenttest.Eventually(t, 5*time.Second, func() bool { subs = numsub(t, s, channel); return subs > 0 },
			"master %d: %d subscribers to %s", i, &subs, channel)
	}
}

// numsub is PUBSUB NUMSUB channel on s.
func numsub(t testing.TB, s *redistest.Server, channel string) int {
	t.Helper()
	conn, err := net.Dial("tcp", s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(conn, "*3\r\n$6\r\nPUBSUB\r\n$6\r\nNUMSUB\r\n$%d\r\n%s\r\n", len(channel), channel)
	r := bufio.NewReader(conn)
	var lines []string
	for range 4 { // *2, $len, channel, :N
		l, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, strings.TrimRight(l, "\r\n"))
	}
	n, err := strconv.Atoi(strings.TrimPrefix(lines[3], ":"))
	if err != nil {
		t.Fatalf("PUBSUB NUMSUB: %q", lines)
	}
	return n
}

// TestThousandObserversAreOneSubscription: 1,000 sessions of one agent
// observing one name cost one subscription per master and one leader read
// per change, not one per observer; each of them hears the change.
func TestThousandObserversAreOneSubscription(t *testing.T) {
	const n = 1000
	servers := redistest.Start(t, 3)
	cfg := agenttest.Config(t, servers, 3*time.Second)
	cfg.AgentID = "host-a"
	cfg.Limits.MaxSessionsPerUID = 2 * n
	a := agenttest.Start(t, cfg)
	observers := make([]*observer, n)
	for i := range observers {
		observers[i] = observe(t, agenttest.Dial(t, cfg.Socket.Path), "many")
	}
	for i, o := range observers {
		if !o.await(10*time.Second, func(es []leaderEvent) bool { return len(es) == 1 && es[0].none }) {
			t.Fatalf("observer %d: %v", i, o.snapshot())
		}
	}
	channel := cfg.Lock.KeyPrefix + "{many}:released"
	for i, s := range servers {
		if got := numsub(t, s, channel); got != 1 {
			t.Fatalf("master %d: %d subscriptions to %s, want 1", i, got, channel)
		}
	}
	reads := metric(t, a, "lock_agent_master_op_duration_seconds_count")
	holder := agenttest.Dial(t, cfg.Socket.Path)
	r := holder.Do("LOCK many value=v")
	for i, o := range observers {
		if !o.saw(r.Int("fence"), "v", 10*time.Second) {
			t.Fatalf("observer %d never saw the grant: %v", i, o.snapshot())
		}
	}
	// Every op on every master: the grant, its leader reads (one per
	// master's message at most, and the timer's), renewals. Far below one
	// per observer.
	ops := metric(t, a, "lock_agent_master_op_duration_seconds_count") - reads
	t.Logf("%v master ops for one grant seen by %d observers", ops, n)
	if ops > 60 {
		t.Fatalf("%v master ops for one grant seen by %d observers", ops, n)
	}
	if pushes := metric(t, a, "lock_agent_leader_pushes_total"); pushes != 2*n {
		t.Fatalf("leader pushes %v, want %d", pushes, 2*n)
	}
}

// TestObserveLimit: a session observes at most max_holds_per_session names.
func TestObserveLimit(t *testing.T) {
	servers := redistest.Start(t, 3)
	cfg := agenttest.Config(t, servers, 3*time.Second)
	cfg.Limits.MaxHoldsPerSession = 2
	agenttest.Start(t, cfg)
	c := agenttest.Dial(t, cfg.Socket.Path)
	for _, line := range []string{"OBSERVE x", "OBSERVE y", "OBSERVE x"} {
		if r := c.Do(line); r.Kind != "OK" {
			t.Fatalf("%s: %s", line, r.Line)
		}
	}
	if r := c.Do("OBSERVE z"); r.Kind != "ERR" || r.Code != "LIMIT" {
		t.Fatalf("a third name: %s", r.Line)
	}
	c.Do("UNOBSERVE x")
	if r := c.Do("OBSERVE z"); r.Kind != "OK" {
		t.Fatalf("after UNOBSERVE: %s", r.Line)
	}
}

// TestLeaderPushLag measures the time from a LOCK, SET or UNLOCK sent to
// one agent to the * LEADER push it causes on an observer of the other
// (an upper bound of the lag: it includes the request's own round).
func TestLeaderPushLag(t *testing.T) {
	a, b, _ := twoAgents(t, 3*time.Second)
	actor := agenttest.Dial(t, a.Config.Socket.Path)
	obs := observe(t, agenttest.Dial(t, b.Config.Socket.Path), "lag")
	if !obs.await(5*time.Second, func(es []leaderEvent) bool { return len(es) == 1 }) {
		t.Fatal("no first push")
	}
	// Each lag is counted without the time the host took from the process
	// meanwhile (both agents are in it): a loaded host's stalls are not
	// the agents' lag.
	stalls := agenttest.MeasureStalls(t)
	var lags []time.Duration
	var stalled time.Duration
	measure := func(line string, seen func([]leaderEvent) bool) agenttest.Reply {
		start, before := time.Now(), stalls.Stalled()
		r := actor.Do(line)
		if !obs.await(5*time.Second, seen) {
			t.Fatalf("%s: no push: %v", line, obs.snapshot())
		}
		es := obs.snapshot()
		stall := stalls.Stalled() - before
		stalled += stall
		lags = append(lags, max(es[len(es)-1].at.Sub(start)-stall, 0))
		return r
	}
	for i := range 100 {
		v := strconv.Itoa(i)
		r := measure("LOCK lag value="+v, func(es []leaderEvent) bool { return es[len(es)-1].value == v })
		measure("SET lag value=s"+v, func(es []leaderEvent) bool { return es[len(es)-1].value == "s"+v })
		measure("UNLOCK lag", func(es []leaderEvent) bool { return es[len(es)-1].none })
		if r.Kind != "OK" {
			t.Fatal(r.Line)
		}
	}
	slices.Sort(lags)
	p50, p99 := lags[len(lags)/2], lags[len(lags)*99/100]
	t.Logf("leader push lag over %d changes: p50 %v, p99 %v, max %v (the process stood stalled %v in all)", len(lags), p50, p99, lags[len(lags)-1], stalled)
	// The target is 10ms p99 (coordination.md §2); the bound asserted is
	// looser, for a loaded host under the race detector.
	if p99 > 100*time.Millisecond {
		t.Fatalf("p99 lag %v", p99)
	}
	obs.checkOrder("observer")
}

// TestLeaderAcrossALocalHandOver: a name passed between two local holders
// of one agent (lock cohorting, on by default) is a new term with the new
// holder's value, for WHO and observers on the other agent, and SET works
// on the passed hold. Whether a release is a local hand-over depends on
// the grant before it having reserved a block (an attempt already in
// flight when the second waiter arrived reserves none): the scenario is
// run until one is.
func TestLeaderAcrossALocalHandOver(t *testing.T) {
	// A long lease: the timer fallback (lease/3) comes after the 2s the
	// pushes are waited for, so each must come from a message.
	a, b, _ := twoAgents(t, 15*time.Second)
	for i := range 10 {
		if handOverOnce(t, a, b, "run"+strconv.Itoa(i)) {
			return
		}
	}
	t.Fatal("no release was a local hand-over in 10 tries")
}

// handOverOnce passes name from one holder to the next on agent a, watched
// from agent b, and checks what b sees; false if the name was not passed
// inside a.
func handOverOnce(t *testing.T, a, b *agenttest.Agent, name string) bool {
	obs := observe(t, agenttest.Dial(t, b.Config.Socket.Path), name)
	other := agenttest.Dial(t, b.Config.Socket.Path)
	first, h1, h2 := agenttest.Dial(t, a.Config.Socket.Path), agenttest.Dial(t, a.Config.Socket.Path), agenttest.Dial(t, a.Config.Socket.Path)
	if r := first.Do("LOCK " + name); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	_, got1 := h1.Send("LOCK " + name + " value=one")
	first.AwaitWaiters(1)
	_, got2 := h2.Send("LOCK " + name + " value=two")
	first.AwaitWaiters(2)
	first.Do("UNLOCK " + name) // h1 is granted by the masters, with a block if h2 was behind it
	r1 := h1.Await(got1)
	if !obs.saw(r1.Int("fence"), "one", 2*time.Second) {
		t.Fatalf("h1's term not seen: %v", obs.snapshot())
	}
	h1.Do("UNLOCK " + name) // passed to h2 inside agent a, if the grant reserved a block
	r2 := h2.Await(got2)
	if r2.Kind != "OK" {
		t.Fatal(r2.Line)
	}
	if r2.Int("fence") != r1.Int("fence")+1 {
		t.Logf("%s: not a local hand-over (fence %d after %d)", name, r2.Int("fence"), r1.Int("fence"))
		h2.Do("UNLOCK " + name)
		return false
	}
	if !obs.saw(r2.Int("fence"), "two", 2*time.Second) {
		t.Fatalf("the hand-over's term not seen: %v", obs.snapshot())
	}
	if d := whoOne(t, other, name); d["value"] != "two" || d["fence"] != strconv.FormatInt(r2.Int("fence"), 10) {
		t.Fatalf("WHO after the hand-over: %+v", d)
	}
	if r := h2.Do("SET " + name + " value=three"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	if !obs.saw(r2.Int("fence"), "three", 2*time.Second) {
		t.Fatalf("the SET not seen: %v", obs.snapshot())
	}
	obs.checkOrder("observer")
	return true
}
