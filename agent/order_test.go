package agent_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/agent"
	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/agenttest"
)

// finals reads the next n final replies (not pushes, not DATA) and returns
// them in the order they came, and the DATA lines by tag.
func (c *lineConn) finals(n int) ([]string, map[string][]string) {
	c.t.Helper()
	var got []string
	data := map[string][]string{}
	for len(got) < n {
		line := c.next(10 * time.Second)
		if w := strings.Fields(line); len(w) > 1 && w[1] == "DATA" {
			data[w[0]] = append(data[w[0]], line)
			continue
		}
		got = append(got, line)
	}
	return got, data
}

// expect checks that replies are, in this order, the lines want describes:
// each a prefix, then "|"-separated words the line must also have.
func expect(t *testing.T, replies []string, want ...string) {
	t.Helper()
	ok := len(replies) == len(want)
	for i := 0; ok && i < len(want); i++ {
		words := strings.Split(want[i], "|")
		ok = strings.HasPrefix(replies[i], words[0])
		for _, w := range words[1:] {
			ok = ok && slices.Contains(strings.Fields(replies[i]), w)
		}
	}
	if !ok {
		t.Fatalf("replies %q, want, in order, %q", replies, want)
	}
}

// parked waits until the agent has n waiting LOCKs, and until every line c
// sent before is dispatched: the PING behind them is answered. It returns
// the final replies that came before the PING's.
func parked(t *testing.T, c *lineConn, holder *agenttest.Conn, n int64) []string {
	t.Helper()
	holder.AwaitWaiters(n)
	c.write("ping PING")
	var before []string
	for {
		r := c.next(5 * time.Second)
		switch w := strings.Fields(r); {
		case r == "ping OK":
			return before
		case len(w) < 2 || w[1] != "DATA":
			before = append(before, r)
		}
	}
}

// TestPipelinedLockWhoUnlockIsTheWalkThrough is issue 17's pipeline: the
// README's walk-through sent as a script to a fresh agent. The WHO sees the
// grant, the UNLOCK releases it, and nothing stays held.
func TestPipelinedLockWhoUnlockIsTheWalkThrough(t *testing.T) {
	a, _ := start(t, nil)
	other := agenttest.Dial(t, a.Config.Socket.Path)
	for i := range 30 {
		c := dialLines(t, a.Config.Socket.Path)
		c.write("2 LOCK jobs/nightly wait=5s", "3 WHO jobs/nightly", "4 UNLOCK jobs/nightly")
		replies, data := c.finals(3)
		expect(t, replies, "2 OK fence=", "3 OK n=1", "4 OK count=0")
		if fence := field(replies[0], "fence"); len(data["3"]) != 1 || field(data["3"][0], "fence") != fence {
			t.Fatalf("round %d: WHO showed %q, want the grant's fence %s", i, data["3"], fence)
		}
		if r := other.Do("WHO jobs/nightly"); r.Int("n") != 0 {
			t.Fatalf("round %d: still held after the UNLOCK: %+v", i, r.Data)
		}
		c.nc.Close()
	}
}

// TestPipelinedUnlockWaitsForAContendedLock: an UNLOCK that arrives while
// the LOCK before it waits for the name applies to the LOCK's grant.
func TestPipelinedUnlockWaitsForAContendedLock(t *testing.T) {
	a, _ := start(t, nil)
	holder := agenttest.Dial(t, a.Config.Socket.Path)
	if r := holder.Do("LOCK jobs/nightly"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	c := dialLines(t, a.Config.Socket.Path)
	c.write("2 LOCK jobs/nightly wait=5s", "3 WHO jobs/nightly", "4 UNLOCK jobs/nightly")
	if early := parked(t, c, holder, 1); len(early) > 0 {
		t.Fatalf("answered while the LOCK before them waits: %q", early)
	}
	holder.Do("UNLOCK jobs/nightly")
	replies, data := c.finals(3)
	expect(t, replies, "2 OK fence=", "3 OK n=1", "4 OK count=0")
	if field(data["3"][0], "fence") != field(replies[0], "fence") {
		t.Fatalf("WHO showed %q after the grant %q", data["3"], replies[0])
	}
	if r := holder.Do("LOCK jobs/nightly wait=0"); r.Kind != "OK" {
		t.Fatalf("the name stayed held: %s", r.Line)
	}
}

// TestRequestsBehindAnUnansweredLock: each way a LOCK can end, and what
// the requests on its hold behind it then answer.
func TestRequestsBehindAnUnansweredLock(t *testing.T) {
	a, _ := start(t, nil)
	holder := agenttest.Dial(t, a.Config.Socket.Path)
	tests := []struct {
		name  string
		held  string   // the holder's LOCK of x, if any, before the pipeline
		lines []string // pipelined after it
		free  bool     // the holder then UNLOCKs x
		want  []string // the final replies, in order
	}{
		{"a CANCELled LOCK leaves nothing for the UNLOCK behind it", "LOCK x",
			[]string{"2 LOCK x wait=5s", "3 UNLOCK x", "4 CANCEL 2"}, false,
			[]string{"4 OK", "2 ERR CANCELLED", "3 ERR NOT_HELD"}},
		{"a LOCK whose wait ran out leaves nothing for the UNLOCK behind it", "LOCK x",
			[]string{"2 LOCK x wait=100ms", "3 UNLOCK x"}, false,
			[]string{"2 BUSY", "3 ERR NOT_HELD"}},
		{"a LOCK refused leaves nothing for the UNLOCK behind it", "LOCK x limit=2",
			[]string{"2 LOCK x wait=5s", "3 UNLOCK x"}, false,
			[]string{"2 ERR CONFLICT", "3 ERR NOT_HELD"}},
		{"an EXTEND behind a LOCK extends its grant", "LOCK x",
			[]string{"2 LOCK x wait=5s", "3 EXTEND x ttl=5s"}, true,
			[]string{"2 OK", "3 OK validity="}},
		{"a second LOCK of the owner re-enters the first's grant", "LOCK x",
			[]string{"2 LOCK x wait=5s", "3 LOCK x wait=0"}, true,
			[]string{"2 OK|count=1", "3 OK|count=2"}},
		{"a second LOCK of the owner tries anew once the first's wait ran out", "LOCK x",
			[]string{"2 LOCK x wait=100ms", "3 LOCK x wait=0"}, false,
			[]string{"2 BUSY", "3 BUSY"}},
		{"a CANCEL of a LOCK waiting for the LOCK before it ends only that one", "LOCK x",
			[]string{"2 LOCK x wait=5s", "3 LOCK x wait=5s", "4 CANCEL 3"}, true,
			[]string{"4 OK", "3 ERR CANCELLED", "2 OK|count=1"}},
		{"a LOCK cannot reuse the tag of a LOCK waiting for its turn", "LOCK x",
			[]string{"2 LOCK x wait=5s", "3 LOCK x wait=5s", "3 LOCK y"}, true,
			[]string{"3 ERR BAD_REQUEST", "2 OK|count=1", "3 OK|count=2"}},
		{"an UNLOCK behind a multi-lock releases its name", "LOCK x",
			[]string{"2 LOCK w x wait=5s", "3 UNLOCK x w"}, true,
			[]string{"2 OK", "3 OK count=0,0"}},
		{"a LOCK, an UNLOCK and a LOCK are a grant, a release and a new grant", "",
			[]string{"2 LOCK x", "3 UNLOCK x", "4 LOCK x", "5 UNLOCK x"}, false,
			[]string{"2 OK|count=1", "3 OK count=0", "4 OK|count=1", "5 OK count=0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.held != "" {
				if r := holder.Do(tt.held); r.Kind != "OK" {
					t.Fatal(r.Line)
				}
			}
			c := dialLines(t, a.Config.Socket.Path)
			c.write(tt.lines...)
			var replies []string
			if tt.free {
				replies = parked(t, c, holder, 1)
				holder.Do("UNLOCK x")
			}
			rest, _ := c.finals(len(tt.want) - len(replies))
			replies = append(replies, rest...)
			expect(t, replies, tt.want...)
			c.nc.Close()
			if !tt.free && tt.held != "" {
				holder.Do("UNLOCK x")
			}
			// Whatever it did, the closed session left nothing held.
			if r := holder.Do("LOCK x wait=5s"); r.Kind != "OK" {
				t.Fatalf("x stayed held: %s", r.Line)
			}
			holder.Do("UNLOCK x")
			if r := holder.Do("LOCK w wait=5s"); r.Kind != "OK" {
				t.Fatalf("w stayed held: %s", r.Line)
			}
			holder.Do("UNLOCK w")
		})
	}
}

// TestRequestsBehindAWaitingLockHoldUpNothingElse: while a LOCK waits,
// the UNLOCK of its hold behind it waits too, but requests on other names
// and other owners of the same name are answered; closing the session then
// ends them all and leaves nothing held or waiting.
func TestRequestsBehindAWaitingLockHoldUpNothingElse(t *testing.T) {
	a, _ := start(t, nil)
	holder := agenttest.Dial(t, a.Config.Socket.Path)
	if r := holder.Do("LOCK x"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	c := dialLines(t, a.Config.Socket.Path)
	c.write("2 LOCK x wait=forever", "3 UNLOCK x", "4 LOCK x", "5 EXTEND x ttl=1s",
		"6 LOCK y", "7 UNLOCK y", "8 LOCK x owner=o wait=0")
	replies, _ := c.finals(3)
	slices.Sort(replies) // 8 may come before or after 6 and 7
	expect(t, replies, "6 OK", "7 OK count=0", "8 BUSY")
	holder.AwaitWaiters(1)
	c.nc.Close()
	var status agenttest.Reply
	lockagenttest.Eventually(t, 5*time.Second, func() bool {
		status = holder.Do("STATUS")
		return status.Int("sessions") == 1 && status.Int("waiters") == 0 && status.Int("holds") == 1
	}, "after the session closed: %+v", &status)
	holder.Do("UNLOCK x")
	if r := holder.Do("WHO x"); r.Int("n") != 0 {
		t.Fatalf("x held after everyone left: %+v", r.Data)
	}
}

// TestRequestsWaitingForTheirTurnCountAgainstTheSessionLimit: each request
// that waits for a LOCK's answer costs the agent until its turn comes, so
// they count against max_holds_per_session with the holds and waits; one
// more is refused at once, and nothing else is.
func TestRequestsWaitingForTheirTurnCountAgainstTheSessionLimit(t *testing.T) {
	a, _ := start(t, func(c *agent.Config) { c.Limits.MaxHoldsPerSession = 3 })
	holder := agenttest.Dial(t, a.Config.Socket.Path)
	if r := holder.Do("LOCK x"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	c := dialLines(t, a.Config.Socket.Path)
	c.write("2 LOCK x wait=5s", "3 UNLOCK x", "4 WHO x", "5 EXTEND x ttl=1s", "6 LOCK x", "7 UNLOCK x owner=o")
	early := parked(t, c, holder, 1)
	slices.Sort(early)
	expect(t, early, "5 ERR LIMIT", "6 ERR LIMIT", "7 ERR NOT_HELD")
	holder.Do("UNLOCK x")
	replies, _ := c.finals(3)
	expect(t, replies, "2 OK|count=1", "3 OK count=0", "4 OK n=0") // the WHO came after the UNLOCK
}
