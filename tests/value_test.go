package tests

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// whoOne is the one holder WHO name shows on c (its DATA lines of
// waiters and delays aside).
func whoOne(t *testing.T, c *agenttest.Conn, name string) map[string]string {
	t.Helper()
	r := c.Do("WHO " + name)
	var holders []map[string]string
	for _, d := range r.Data {
		if _, ok := d["fence"]; ok {
			holders = append(holders, d)
		}
	}
	if r.Kind != "OK" || len(holders) != 1 {
		t.Fatalf("WHO %s: want one holder, got %s %+v", name, r.Line, r.Data)
	}
	return holders[0]
}

// TestValueAtLockSeenByWhoOnTheOtherAgent: a value given with LOCK is in
// the holder record on the masters, so WHO on another agent shows it; a
// hold without one shows none; a re-entry's value= leaves it as it was.
func TestValueAtLockSeenByWhoOnTheOtherAgent(t *testing.T) {
	a, b, _ := twoAgents(t, 3*time.Second)
	holder := agenttest.Dial(t, a.Config.Socket.Path)
	other := agenttest.Dial(t, b.Config.Socket.Path)
	if r := holder.Do("LOCK v value=http://10.0.0.1:8080/x%20y"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	if d := whoOne(t, other, "v"); d["value"] != "http://10.0.0.1:8080/x%20y" || d["agent"] != "host-a" {
		t.Fatalf("WHO on the other agent: %+v", d)
	}
	if r := holder.Do("LOCK v value=other"); r.Kind != "OK" || r.Int("count") != 2 {
		t.Fatalf("re-entry: %s", r.Line)
	}
	if d := whoOne(t, other, "v"); d["value"] != "http://10.0.0.1:8080/x%20y" {
		t.Fatalf("a re-entry's value= changed the value: %+v", d)
	}
	if r := holder.Do("LOCK plain"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	if d := whoOne(t, other, "plain"); d["value"] != "" {
		t.Fatalf("a hold without value= shows one: %+v", d)
	}
	if _, ok := whoOne(t, other, "plain")["value"]; ok {
		t.Fatal("WHO shows value= for a hold without one")
	}
}

// TestSetReplacesTheValueOnTheMasters: SET is seen by WHO on the other
// agent, survives a master that lost the record (the watchdog re-creates
// it with the new value), and a SET by a session or owner that does not
// hold the name is NOT_HELD and changes nothing.
func TestSetReplacesTheValueOnTheMasters(t *testing.T) {
	a, b, servers := twoAgents(t, time.Second)
	holder := agenttest.Dial(t, a.Config.Socket.Path)
	other := agenttest.Dial(t, b.Config.Socket.Path)
	if r := holder.Do("LOCK s value=one owner=w"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	for _, bad := range []struct {
		c    *agenttest.Conn
		line string
	}{
		{other, "SET s value=stolen"},
		{other, "SET s value=stolen owner=w"},
		{holder, "SET s value=stolen"}, // another owner
		{holder, "SET never-held value=x owner=w"},
	} {
		if r := bad.c.Do(bad.line); r.Kind != "ERR" || r.Code != "NOT_HELD" {
			t.Fatalf("%s: want ERR NOT_HELD, got %s", bad.line, r.Line)
		}
	}
	if d := whoOne(t, other, "s"); d["value"] != "one" {
		t.Fatalf("after SETs by non-holders: %+v", d)
	}
	if r := holder.Do("SET s value=two owner=w"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	if d := whoOne(t, other, "s"); d["value"] != "two" {
		t.Fatalf("after SET: %+v", d)
	}
	// A master that lost its copy of the record gets it back from the
	// watchdog's next renewal, with the value SET gave.
	records := a.Config.Lock.KeyPrefix + "{s}:h:*"
	value := func() string {
		v, _ := servers[0].Do("EVAL", "local k = redis.call('KEYS', ARGV[1])[1] if not k then return false end return redis.call('HGET', k, 'value')", "0", records)
		return v
	}
	if _, err := servers[0].Do("EVAL", "for _, k in ipairs(redis.call('KEYS', ARGV[1])) do redis.call('DEL', k) end return 1", "0", records); err != nil {
		t.Fatal(err)
	}
	if servers[0].Keys(records) != 0 {
		t.Fatal("the record is still on master 0")
	}
	var got string
	lockagenttest.Eventually(t, 5*time.Second, func() bool { got = value(); return got == "two" },
		"master 0's re-created record has value %q, not two", &got)
}

// TestCheckIsTrueOnlyForTheCurrentFence: CHECK on another agent is true
// for the current holder's fence, false for an older one, after a newer
// grant, and after the last UNLOCK.
func TestCheckIsTrueOnlyForTheCurrentFence(t *testing.T) {
	a, b, _ := twoAgents(t, 3*time.Second)
	ca := agenttest.Dial(t, a.Config.Socket.Path)
	cb := agenttest.Dial(t, b.Config.Socket.Path)
	check := func(c *agenttest.Conn, fence int64, want string) {
		t.Helper()
		if r := c.Do("CHECK c fence=" + strconv.FormatInt(fence, 10)); r.Kind != "OK" || r.Fields["current"] != want {
			t.Fatalf("CHECK c fence=%d: want current=%s, got %s", fence, want, r.Line)
		}
	}
	first := ca.Do("LOCK c")
	f1 := first.Int("fence")
	check(cb, f1, "true")
	check(ca, f1, "true")
	check(cb, f1-1, "false")
	check(cb, f1+1, "false")
	ca.Do("UNLOCK c")
	check(cb, f1, "false")
	second := cb.Do("LOCK c")
	f2 := second.Int("fence")
	if f2 <= f1 {
		t.Fatalf("fences %d then %d", f1, f2)
	}
	check(ca, f1, "false")
	check(ca, f2, "true")
	cb.Do("UNLOCK c")
	check(ca, f2, "false")
	if r := ca.Do("CHECK c fence=18446744073709551615"); r.Fields["current"] != "false" { // beyond any int64 fence
		t.Fatal(r.Line)
	}
}

// TestCoordinationBadInput: malformed SET, CHECK, OBSERVE, UNOBSERVE and
// value= are BAD_REQUEST and change nothing: the value stays, no push
// comes; OBSERVE past max_holds_per_session names is LIMIT.
func TestCoordinationBadInput(t *testing.T) {
	a, _, _ := twoAgents(t, 3*time.Second)
	c := agenttest.Dial(t, a.Config.Socket.Path)
	if r := c.Do("LOCK bad value=kept"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	for _, line := range []string{
		"SET", "SET bad", "SET bad value=a value", "SET bad value=no!", "SET bad value=x owner=a b",
		"SET bad other value=x", "SET bad value=x color=red",
		"CHECK", "CHECK bad", "CHECK bad fence=0", "CHECK bad fence=-1", "CHECK bad fence=x", "CHECK bad fence=1 x=2", "CHECK a b fence=1",
		"OBSERVE", "OBSERVE a b", "OBSERVE bad x=1", "UNOBSERVE", "UNOBSERVE a b",
		"LOCK bad2 value=é", "LOCK bad2 value=a*b", "LOCK bad2 value=" + strings.Repeat("x", 513),
	} {
		r := c.Do(line)
		if r.Kind != "ERR" || r.Code != "BAD_REQUEST" {
			t.Fatalf("%q: want ERR BAD_REQUEST, got %s", line, r.Line)
		}
	}
	if d := whoOne(t, c, "bad"); d["value"] != "kept" {
		t.Fatalf("the value changed: %+v", d)
	}
	if r := c.Do("WHO bad2"); r.Kind != "OK" || len(r.Data) != 0 {
		t.Fatalf("a malformed LOCK took the name: %s", r.Line)
	}
	if p := c.Push(100 * time.Millisecond); p != "" {
		t.Fatalf("a push after malformed requests: %s", p)
	}
}

// TestSetTakesItsTurn: a SET pipelined between a LOCK and a WHO and an
// UNLOCK of the same hold takes effect in line order: the WHO shows the
// new value, the UNLOCK is not overtaken by the SET's round (the name is
// free after, with no record left behind).
func TestSetTakesItsTurn(t *testing.T) {
	a, b, servers := twoAgents(t, 3*time.Second)
	c := agenttest.Dial(t, a.Config.Socket.Path)
	for i := range 20 {
		v := strconv.Itoa(i)
		_, locked := c.Send("LOCK p value=old")
		_, set := c.Send("SET p value=new" + v)
		_, who := c.Send("WHO p")
		_, unlocked := c.Send("UNLOCK p")
		for _, ch := range []<-chan agenttest.Reply{locked, set} {
			if r := c.Await(ch); r.Kind != "OK" {
				t.Fatal(r.Line)
			}
		}
		if r := c.Await(who); len(r.Data) != 1 || r.Data[0]["value"] != "new"+v {
			t.Fatalf("WHO after SET: %s %+v", r.Line, r.Data)
		}
		if r := c.Await(unlocked); r.Kind != "OK" {
			t.Fatal(r.Line)
		}
	}
	if r := agenttest.Dial(t, b.Config.Socket.Path).Do("WHO p"); r.Kind != "OK" || len(r.Data) != 0 {
		t.Fatalf("held after the last UNLOCK: %s", r.Line)
	}
	for i, s := range servers {
		if n := s.Keys(a.Config.Lock.KeyPrefix + "{p}:h:*"); n != 0 {
			t.Fatalf("master %d keeps %d records", i, n)
		}
	}
}

// TestAccessRulesGovernSetObserveCheck: SET, OBSERVE and CHECK are
// allowed only by a rule that lists their verb for the name; UNOBSERVE is
// never denied.
func TestAccessRulesGovernSetObserveCheck(t *testing.T) {
	servers := redistest.Start(t, 3)
	cfg := agenttest.Config(t, servers, 3*time.Second)
	me := os.Getuid()
	cfg.ACL = parseACL(t, fmt.Sprintf(`rule "locker" {
 uid = %d
 names = ["**"]
 verbs = ["lock", "unlock"]
}
rule "coordinator" {
 uid = %d
 names = ["open/**"]
 verbs = ["set", "observe", "check"]
}`, me, me))
	agenttest.Start(t, cfg)
	c := agenttest.Dial(t, cfg.Socket.Path)
	for _, name := range []string{"open/x", "closed/x"} {
		wantOK(t, c.Do("LOCK "+name+" value=a"))
	}
	wantOK(t, c.Do("SET open/x value=b"))
	wantOK(t, c.Do("OBSERVE open/x"))
	wantOK(t, c.Do("CHECK open/x fence=1"))
	wantDenied(t, c.Do("SET closed/x value=b"), "closed/x")
	wantDenied(t, c.Do("OBSERVE closed/x"), "closed/x")
	wantDenied(t, c.Do("CHECK closed/x fence=1"), "closed/x")
	wantOK(t, c.Do("UNOBSERVE closed/x"))
	wantOK(t, c.Do("UNOBSERVE open/x"))
}

// TestATailIsNeitherCurrentNorLeader: a hold that ended uncleanly with
// delay= keeps its name unavailable (a tail), but its fence is no longer
// current for CHECK, and its observers are told none.
func TestATailIsNeitherCurrentNorLeader(t *testing.T) {
	a, b, _ := twoAgents(t, 3*time.Second)
	holder := agenttest.Dial(t, a.Config.Socket.Path)
	other := agenttest.Dial(t, b.Config.Socket.Path)
	obs := observe(t, agenttest.Dial(t, b.Config.Socket.Path), "tail")
	r := holder.Do("LOCK tail delay=30s value=v")
	if r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	if !obs.saw(r.Int("fence"), "v", 5*time.Second) {
		t.Fatalf("the hold not seen: %v", obs.snapshot())
	}
	holder.Close() // an unclean end: the delay stands
	var w agenttest.Reply
	lockagenttest.Eventually(t, 5*time.Second, func() bool {
		w = other.Do("WHO tail")
		return w.Int("n") == 0 && len(w.Data) > 0 && w.Data[0]["delayed_until"] != ""
	}, "no delay after an unclean end: %s", &w.Line)
	if c := other.Do("CHECK tail fence=" + strconv.FormatInt(r.Int("fence"), 10)); c.Fields["current"] != "false" {
		t.Fatalf("CHECK of a tail's fence: %s", c.Line)
	}
	if !obs.await(5*time.Second, func(es []leaderEvent) bool { return es[len(es)-1].none }) {
		t.Fatalf("no none after the hold ended: %v", obs.snapshot())
	}
	if l := other.Do("LOCK tail wait=0"); l.Kind != "BUSY" {
		t.Fatalf("the delay does not stand: %s", l.Line)
	}
}
