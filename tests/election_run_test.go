package tests

import (
	"bufio"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/history"
)

// election is a run of candidates and observers of one name on real
// agents, recorded in h.
type election struct {
	t      testing.TB
	h      *history.History
	name   string
	agents []*agentProc

	mu      sync.Mutex
	nextID  int
	leader  *candidate      // the candidate that read the OK of the current term, nil while none did
	grants  []time.Duration // the stamps of every grant read, in order read
	fences  []int64         // the fence of each of grants
	changed chan struct{}   // closed and replaced at every grant and every end of a term
	cands   map[*candidate]bool
	obs     map[*electionObserver]bool
	blind   map[int]bool  // observers whose agent was cut off while they observed
	seen    map[int]int64 // each observer's last push (its fence, 0 for none)
	stopped bool
	readers sync.WaitGroup
}

func newElection(t testing.TB, name string, agents []*agentProc) *election {
	return &election{t: t, h: history.New(), name: name, agents: agents, changed: make(chan struct{}),
		cands: map[*candidate]bool{}, obs: map[*electionObserver]bool{}, blind: map[int]bool{}, seen: map[int]int64{}}
}

func (e *election) newID() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.nextID++
	return e.nextID
}

// changedLocked wakes whoever waits for a change; e.mu is held.
func (e *election) changedLocked() {
	close(e.changed)
	e.changed = make(chan struct{})
}

// await waits until cond (called with e.mu held) is true.
func (e *election) await(within time.Duration, what string, cond func() bool) {
	e.t.Helper()
	deadline := time.After(within)
	for {
		e.mu.Lock()
		ok, ch := cond(), e.changed
		e.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			e.mu.Lock()
			seen := fmt.Sprint(e.seen)
			e.mu.Unlock()
			e.t.Fatalf("no %s within %v (observers' last pushes: %s)\n%s", what, within, seen, dumpHistory(e.t, e.h.Events()))
		}
	}
}

// awaitLeader is the current leader, once there is one.
func (e *election) awaitLeader(within time.Duration) *candidate {
	e.t.Helper()
	var l *candidate
	e.await(within, "leader", func() bool { l = e.leader; return l != nil })
	return l
}

// awaitGrantAfter is the stamp of the first grant read after the instant at.
func (e *election) awaitGrantAfter(at, within time.Duration) time.Duration {
	e.t.Helper()
	var grant time.Duration
	e.await(within, "new term", func() bool {
		i := slices.IndexFunc(e.grants, func(g time.Duration) bool { return g > at })
		if i >= 0 {
			grant = e.grants[i]
		}
		return i >= 0
	})
	return grant
}

// awaitTermAbove is the stamp of the first grant read with a fence above
// fence: a term after the one that fence began, whatever ended that one.
func (e *election) awaitTermAbove(fence int64, within time.Duration) time.Duration {
	e.t.Helper()
	var grant time.Duration
	e.await(within, "new term", func() bool {
		i := slices.IndexFunc(e.fences, func(f int64) bool { return f > fence })
		if i >= 0 {
			grant = e.grants[i]
		}
		return i >= 0
	})
	return grant
}

// topFence is the highest fence granted so far, as far as the test has read.
func (e *election) topFence() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.fences) == 0 {
		return 0
	}
	return slices.Max(e.fences)
}

// candidate is one relay process campaigning, again after each term.
type candidate struct {
	e     *election
	id    int
	agent *agentProc
	value string
	proc  *relayProc
	fence int64 // the term it holds, under e.mu; 0 while it holds none
	tag   int   // the reader's own
}

// campaign starts a candidate process on agent a.
func (e *election) campaign(a *agentProc) *candidate {
	id := e.newID()
	c := &candidate{e: e, id: id, agent: a, value: "v" + strconv.Itoa(id), proc: startRelay(e.t, a.sock)}
	e.mu.Lock()
	e.cands[c] = true
	e.mu.Unlock()
	e.readers.Add(1)
	go c.read()
	return c
}

func (c *candidate) event(typ history.Type, at time.Duration, fence int64) {
	c.e.h.AddStamped(history.Event{Client: c.id, Type: typ, Kind: "fair", Name: c.e.name, Fence: fence,
		Value: c.value, Agent: c.agent.id}, at)
}

func (c *candidate) read() {
	defer c.e.readers.Done()
	for l := range c.proc.lines {
		c.handle(l)
	}
	c.e.mu.Lock()
	delete(c.e.cands, c)
	c.e.mu.Unlock()
}

// handle is what the candidate does with one line of its relay.
func (c *candidate) handle(l relayLine) {
	words := strings.Fields(l.text)
	switch {
	case l.dir == "+":
		c.lock()
	case l.dir == ">" && len(words) > 1 && words[1] == "LOCK":
		c.event(history.Invoke, l.at, 0)
	case l.dir == ">" && len(words) > 1 && words[1] == "UNLOCK":
		c.ended(history.Release, l.at, false)
	case l.dir == "<" && l.text == "EOF":
		c.ended(history.Lost, l.at, false) // the agent died: the session ended
	case l.dir != "<" || len(words) < 2:
	case words[0] == "*" && words[1] == "LOST":
		c.ended(history.Lost, l.at, true)
	case strings.HasPrefix(words[0], "L") && words[1] == "OK":
		c.elected(l.at, fields(l.text)["fence"])
	case strings.HasPrefix(words[0], "L"):
		c.event(history.Fail, l.at, 0)
		time.AfterFunc(50*time.Millisecond, c.lock) // e.g. NO_QUORUM while cut off: not in a tight loop
	case strings.HasPrefix(words[0], "U") && words[1] == "OK":
		c.lock() // resigned: campaign again
	case strings.HasPrefix(words[0], "U"):
		// Not held: the term had ended already (a LOST, which campaigned
		// again). A second LOCK now would be this session's re-entry,
		// granted the same term again.
	}
}

func (c *candidate) lock() {
	c.e.mu.Lock()
	stopped := c.e.stopped
	c.e.mu.Unlock()
	if !stopped {
		c.tag++
		c.proc.send(fmt.Sprintf("L%d LOCK %s fair=true value=%s", c.tag, c.e.name, c.value))
	}
}

func (c *candidate) elected(at time.Duration, fence string) {
	f, err := strconv.ParseInt(fence, 10, 64)
	if err != nil {
		c.e.t.Errorf("candidate %d: a grant without a fence: %q", c.id, fence)
	}
	c.event(history.OK, at, f)
	c.e.mu.Lock()
	defer c.e.mu.Unlock()
	c.fence, c.e.leader = f, c
	c.e.grants, c.e.fences = append(c.e.grants, at), append(c.e.fences, f)
	c.e.changedLocked()
}

// ended records the end of the candidate's term, if it has one, and
// campaigns again if again.
func (c *candidate) ended(typ history.Type, at time.Duration, again bool) {
	c.e.mu.Lock()
	fence := c.fence
	c.fence = 0
	if c.e.leader == c {
		c.e.leader = nil
		c.e.changedLocked()
	}
	c.e.mu.Unlock()
	if fence != 0 {
		c.event(typ, at, fence)
	}
	if again {
		c.lock()
	}
}

// resign sends UNLOCK (the relay records when); the candidate campaigns
// again when it is answered.
func (c *candidate) resign() {
	c.e.mu.Lock()
	fence := c.fence
	c.e.mu.Unlock()
	c.proc.send(fmt.Sprintf("U%d UNLOCK %s", fence, c.e.name))
}

// kill kills the candidate's process: its term ends at the kill.
func (c *candidate) kill() time.Duration {
	at := c.proc.kill()
	c.ended(history.Release, at, false)
	return at
}

// electionObserver is one session observing the name, in this process.
type electionObserver struct {
	e       *election
	id      int
	agent   *agentProc
	conn    net.Conn
	closing bool // under e.mu: the test ends the session
}

// observe starts an observer session on agent a.
func (e *election) observe(a *agentProc) {
	e.t.Helper()
	conn, err := net.Dial("unix", a.sock)
	if err != nil {
		e.t.Fatal(err)
	}
	o := &electionObserver{e: e, id: e.newID(), agent: a, conn: conn}
	e.mu.Lock()
	e.obs[o] = true
	e.mu.Unlock()
	fmt.Fprintf(conn, "o OBSERVE %s\n", e.name)
	e.readers.Add(1)
	go o.read()
}

func (o *electionObserver) event(typ history.Type, at time.Duration, fence int64, value, agent string) {
	o.e.h.AddStamped(history.Event{Client: o.id, Type: typ, Kind: "observer", Name: o.e.name, Fence: fence,
		Value: value, Agent: agent}, at)
}

func (o *electionObserver) read() {
	defer o.e.readers.Done()
	r := bufio.NewReader(o.conn)
	for {
		line, err := r.ReadString('\n')
		at := history.Stamp()
		if err != nil {
			o.e.mu.Lock()
			closing := o.closing
			delete(o.e.obs, o)
			o.e.mu.Unlock()
			if !closing {
				o.event(history.Unobserve, at, 0, "", "") // its agent died
			}
			return
		}
		o.handle(at, strings.TrimSuffix(line, "\n"))
	}
}

func (o *electionObserver) handle(at time.Duration, line string) {
	words := strings.Fields(line)
	switch {
	case len(words) >= 2 && words[0] == "o" && words[1] == "OK":
		o.event(history.Observe, at, 0, "", "")
	case len(words) >= 2 && words[0] == "o":
		o.e.t.Errorf("observer %d: %s", o.id, line)
	case len(words) >= 4 && words[1] == "LEADER" && words[3] == "none":
		o.event(history.Leader, at, 0, "", "")
		o.pushed(0)
	case len(words) >= 4 && words[1] == "LEADER":
		f := fields(line)
		fence, err := strconv.ParseInt(f["fence"], 10, 64)
		if err != nil || fence == 0 {
			o.e.t.Errorf("observer %d: a push without a fence: %s", o.id, line)
		}
		o.event(history.Leader, at, fence, f["value"], f["agent"])
		o.pushed(fence)
	}
}

// pushed notes the observer's last push, for awaitSeen.
func (o *electionObserver) pushed(fence int64) {
	o.e.mu.Lock()
	defer o.e.mu.Unlock()
	o.e.seen[o.id] = fence
	o.e.changedLocked()
}

// awaitSeen waits until every live observer's last push is fence or a
// newer one (so that a wrong push fails the checker, not the wait).
func (e *election) awaitSeen(fence int64, within time.Duration) {
	e.t.Helper()
	e.await(within, fmt.Sprintf("push of term %d to every observer", fence), func() bool {
		for o := range e.obs {
			if f, ok := e.seen[o.id]; !ok || f < fence {
				return false
			}
		}
		return true
	})
}

// stop ends the run: no more campaigns, every candidate killed (its term
// ends there), every observer session closed, and every reader done.
func (e *election) stop() []history.Event {
	e.mu.Lock()
	e.stopped = true
	cands := slices.Collect(maps.Keys(e.cands))
	obs := slices.Collect(maps.Keys(e.obs))
	for _, o := range obs {
		o.closing = true
	}
	e.mu.Unlock()
	for _, c := range cands {
		c.kill()
	}
	for _, o := range obs {
		o.event(history.Unobserve, history.Stamp(), 0, "", "")
		o.conn.Close()
	}
	e.readers.Wait()
	return e.h.Events()
}

// ask is a Leader() call on agent a, as a fresh session: it sends OBSERVE
// (recorded as Ask right before), reads the OK and the first push, and
// ends. Its answer must be the leader as of the OBSERVE or later
// (history's observer-stale).
func (e *election) ask(a *agentProc) {
	e.t.Helper()
	conn, err := net.Dial("unix", a.sock)
	if err != nil {
		e.t.Fatal(err)
	}
	defer conn.Close()
	o := &electionObserver{e: e, id: e.newID(), agent: a, conn: conn}
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	o.event(history.Ask, history.Stamp(), 0, "", "")
	fmt.Fprintf(conn, "o OBSERVE %s\n", e.name)
	r := bufio.NewReader(conn)
	for {
		line, err := r.ReadString('\n')
		at := history.Stamp()
		if err != nil {
			e.t.Errorf("ask %d: %v", o.id, err)
			return
		}
		line = strings.TrimSuffix(line, "\n")
		words := strings.Fields(line)
		switch {
		case len(words) >= 2 && words[0] == "o" && words[1] == "OK":
			o.event(history.Observe, at, 0, "", "")
		case len(words) >= 2 && words[0] == "o":
			e.t.Errorf("ask %d: %s", o.id, line)
			return
		case len(words) >= 4 && words[1] == "LEADER" && words[3] == "none":
			o.event(history.Leader, at, 0, "", "")
			o.event(history.Unobserve, history.Stamp(), 0, "", "")
			return
		case len(words) >= 4 && words[1] == "LEADER":
			f := fields(line)
			fence, _ := strconv.ParseInt(f["fence"], 10, 64)
			o.event(history.Leader, at, fence, f["value"], f["agent"])
			o.event(history.Unobserve, history.Stamp(), 0, "", "")
			return
		}
	}
}
