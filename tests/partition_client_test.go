package tests

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/history"
)

// recClient is one session of a partition run. It sends LOCKs and UNLOCKs
// and records in the history what it sent (just before sending) and what
// it read (when it was read from the socket): the spans in which it
// believed it held. A grant and a LOST both go by when they were read, in
// the order they came: a grant recorded when the test got round to it (Do
// returned) came after the LOST that followed it on the wire, read and
// stamped meanwhile, and the checker saw a hold that was never lost
// (a CI run: "client 21 cohort pco fence=…4335 [12.777594s, 20.301483s]",
// its LOST stamped 70µs before its grant).
type recClient struct {
	t    *testing.T
	id   int
	kind string
	conn *agenttest.Conn
	h    *history.History
	held map[string]int64 // name → fence of each hold it has now
	odd  *atomic.Int64    // replies that are neither a grant nor a refusal the run expects
}

// lock sends line, a LOCK of names (in the order given), and records its
// invocation and its answer.
func (c *recClient) lock(line string, names []string) (granted bool, code string) {
	for _, n := range names {
		c.h.Add(history.Event{Client: c.id, Type: history.Invoke, Kind: c.kind, Name: n})
	}
	r := c.conn.Do(line)
	if r.Kind != "OK" {
		for _, n := range names {
			c.h.Add(history.Event{Client: c.id, Type: history.Fail, Kind: c.kind, Name: n, Detail: r.Line})
		}
		if r.Kind != "BUSY" && r.Code != "NO_QUORUM" {
			c.odd.Add(1)
			c.t.Logf("client %d (%s): %s -> %s", c.id, c.kind, line, r.Line)
		}
		return false, r.Code
	}
	fences := strings.Split(r.Fields["fence"], ",")
	slot, _ := strconv.Atoi(r.Fields["slot"])
	mode, limit := history.Exclusive, 1
	for _, opt := range strings.Fields(line) {
		if opt == "mode=shared" {
			mode = history.Shared
		}
		if k, ok := strings.CutPrefix(opt, "limit="); ok {
			limit, _ = strconv.Atoi(k)
		}
	}
	for i, n := range names {
		fence, _ := strconv.ParseInt(fences[i], 10, 64)
		c.held[n] = fence
		c.h.AddStamped(history.Event{Client: c.id, Type: history.OK, Kind: c.kind, Name: n, Mode: mode, Limit: limit, Slot: slot, Fence: fence}, r.At)
	}
	return true, ""
}

// hold keeps what it holds for d, or until all of it is lost.
func (c *recClient) hold(d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for len(c.held) > 0 {
		select {
		case p := <-c.conn.Pushes():
			c.push(p)
		case <-timer.C:
			return
		}
	}
}

// push records a LOST of a hold the client has; a LOST of a hold it has
// released already is stale, and ignored.
func (c *recClient) push(p string) {
	words := strings.Fields(p)
	if len(words) < 4 || words[1] != "LOST" {
		c.t.Errorf("client %d: unexpected push %q", c.id, p)
		return
	}
	name, fenceField := words[2], ""
	for _, w := range words[3:] {
		if v, ok := strings.CutPrefix(w, "fence="); ok {
			fenceField = v
		}
	}
	fence, _ := strconv.ParseInt(fenceField, 10, 64)
	at := c.conn.Arrived(p)
	if held, ok := c.held[name]; ok && held == fence {
		delete(c.held, name)
		e := history.Event{Client: c.id, Type: history.Lost, Kind: c.kind, Name: name, Fence: fence, Detail: p}
		if at == 0 {
			c.h.Add(e)
			return
		}
		c.h.AddStamped(e, at)
	}
}

// drain reads the pushes that already came.
func (c *recClient) drain() {
	for _, p := range drainPushes(c.conn) {
		c.push(p)
	}
}

// release unlocks each name still held, one at a time: the hold ends when
// its UNLOCK is sent, whatever it answers, or at its LOST if that came
// first. The LOSTs that came are read before each UNLOCK, and recorded
// when they arrived: one that came while an UNLOCK before waited for its
// answer (on a minority partition, a release waits for the silent masters)
// ended its hold then, not when the client got round to reading it (a
// soak run counted client 18's multi-lock hold of pmb on to its UNLOCK,
// sent after a 1.1s UNLOCK of pma, 84ms into another client's grant).
func (c *recClient) release() {
	c.drain()
	names := make([]string, 0, len(c.held))
	for n := range c.held {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		c.drain()
		if _, ok := c.held[n]; !ok {
			continue // lost meanwhile
		}
		c.h.Add(history.Event{Client: c.id, Type: history.Release, Kind: c.kind, Name: n, Fence: c.held[n]})
		delete(c.held, n)
		if r := c.conn.Do("UNLOCK " + n); r.Kind != "OK" && r.Code != "NOT_HELD" {
			c.odd.Add(1)
			c.t.Logf("client %d (%s): UNLOCK %s -> %s", c.id, c.kind, n, r.Line)
		}
	}
}

// clientKind is one kind of client: the LOCK line it sends next, the names
// in it (in the line's order), which agent each of its clients uses, and
// how long it holds (nil: up to 40ms).
type clientKind struct {
	kind    string
	clients int
	agentOf func(client int) int
	next    func(client int, rng *rand.Rand) (line string, names []string)
	holdFor func(rng *rand.Rand) time.Duration
}

// briefly is how long most clients hold.
func briefly(rng *rand.Rand) time.Duration { return time.Duration(rng.IntN(40)) * time.Millisecond }

// alternate puts a kind's clients on agents 0, 1, 0, 1, ...
func alternate(client int) int { return client % 2 }

// partitionKinds is every kind at once, each on its own names, each
// with clients on both agents, so that every name can progress while
// either agent is cut off.
func partitionKinds() []clientKind {
	one := func(line, name string) (string, []string) { return line + " wait=500ms", []string{name} }
	return []clientKind{
		{"exclusive", 4, alternate, func(int, *rand.Rand) (string, []string) { return one("LOCK px", "px") }, nil},
		{"shared", 4, alternate, func(_ int, rng *rand.Rand) (string, []string) {
			if rng.IntN(3) == 0 {
				return one("LOCK prw", "prw")
			}
			return one("LOCK prw mode=shared", "prw")
		}, nil},
		{"semaphore", 5, alternate, func(int, *rand.Rand) (string, []string) { return one("LOCK psem limit=2", "psem") }, nil},
		{"fair", 4, alternate, func(_ int, rng *rand.Rand) (string, []string) {
			if rng.IntN(3) == 0 {
				return one("LOCK pfair fair=true mode=shared", "pfair")
			}
			return one("LOCK pfair fair=true", "pfair")
		}, nil},
		{"multi", 3, alternate, func(client int, _ *rand.Rand) (string, []string) {
			if client%2 == 0 {
				return "LOCK pma pmb wait=500ms", []string{"pma", "pmb"}
			}
			return "LOCK pmb pma wait=500ms", []string{"pmb", "pma"}
		}, nil},
		// Three sessions of agent 0 on one name queue behind each other:
		// the agent hands the name over among them (cohorting).
		{"cohort", 4, func(client int) int { return min(client, 3) / 3 }, func(int, *rand.Rand) (string, []string) { return one("LOCK pco", "pco") }, nil},
		// Long holds, mostly shared so that both agents often hold at once:
		// whichever agent a minority partition cuts off loses its hold.
		{"long", 4, alternate, func(_ int, rng *rand.Rand) (string, []string) {
			if rng.IntN(4) == 0 {
				return one("LOCK plong", "plong")
			}
			return one("LOCK plong mode=shared", "plong")
		}, func(rng *rand.Rand) time.Duration { return time.Duration(1500+rng.IntN(1000)) * time.Millisecond }},
	}
}
