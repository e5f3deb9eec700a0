package tests

import (
	"strings"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/faultproxy"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// TestAWaitThatEndsWhileItsRoundWinsLeavesNothingHeld: a LOCK whose wait
// ends (CANCEL, or its wait= running out) while the agent's round for it
// is in flight is answered CANCELLED or BUSY only once that round is
// settled, and, if it won, once the name is given back in the masters. A
// client told CANCELLED that then asks WHO, or an election's Leader after
// a cancelled rival (TestElectionAsEtcdUsersExpectIt, which met this in a
// soak beside two CPU hogs), must find no holder that nobody is.
//
// Made deterministic: the agent's replies from every master are held
// (black-holed toward it), so its round for the LOCK takes effect in the
// masters (agent 0's WHO shows agent 1 holding) but cannot settle until
// the links pass again. The old agent answered at once, with the record
// left in the masters.
func TestAWaitThatEndsWhileItsRoundWinsLeavesNothingHeld(t *testing.T) {
	t.Parallel()
	servers := redistest.Start(t, 3)
	// A round waits three of a master's timeouts for its answer: long
	// enough here that it is still in flight when the wait ends. (The
	// masters record the setting: both agents have it.)
	direct := agenttest.Config(t, servers, 20*time.Second)
	direct.AgentID = "host-0"
	direct.Lock.MasterTimeout = time.Second
	slow, links := proxiedConfig(t, servers, 20*time.Second)
	slow.Lock.MasterTimeout = time.Second
	pass := func() {
		for _, l := range links {
			l.SetMode(faultproxy.Pass)
		}
	}
	other := agenttest.Dial(t, agenttest.Start(t, direct).Config.Socket.Path)
	a := agenttest.Start(t, slow)
	t.Cleanup(pass) // before the agents stop
	for _, tc := range []struct {
		name, lock string
		end        func(cl *agenttest.Conn, tag string)
		want       string
	}{
		{"cancel/won", "LOCK cancel/won wait=10s", func(cl *agenttest.Conn, tag string) { cl.Send("CANCEL " + tag) }, "ERR CANCELLED"},
		{"timeout/won", "LOCK timeout/won wait=100ms", func(*agenttest.Conn, string) {}, "BUSY"},
	} {
		t.Run(tc.name, func(t *testing.T) { awaitSettledAnswer(t, a, other, links, pass, tc.name, tc.lock, tc.end, tc.want) })
	}
}

// awaitSettledAnswer sends lock on a new connection to a while a's replies
// from the masters are held, awaits its round's effect in the masters (WHO
// on other), ends its wait with end, and checks that the answer, want,
// comes only when the masters no longer hold the name for it.
func awaitSettledAnswer(t *testing.T, a *agenttest.Agent, other *agenttest.Conn, links []*faultproxy.Proxy, pass func(),
	name, lock string, end func(cl *agenttest.Conn, tag string), want string) {
	cl := agenttest.Dial(t, a.Config.Socket.Path)
	cl.AwaitMasters("up", 3)
	for _, l := range links {
		l.SetMode(faultproxy.BlackHoleToClient)
	}
	tag, answer := cl.Send(lock)
	var who agenttest.Reply
	lockagenttest.Eventually(t, 10*time.Second, func() bool { // the round's scripts ran in the masters
		who = other.Do("WHO " + name)
		return who.Int("n") == 1
	}, "%s: the round never took effect in the masters: WHO %q", name, &who.Line)
	end(cl, tag)
	var st agenttest.Reply
	lockagenttest.Eventually(t, 10*time.Second, func() bool { // the wait ended: it left the queue
		st = cl.Do("STATUS")
		return st.Int("waiters") == 0
	}, "%s: the LOCK still waits: STATUS %q", name, &st.Line)
	cl.Do("PING") // an answer sent when the wait ended is in before this one
	var r agenttest.Reply
	early := false
	select {
	case r = <-answer:
		early = true
	default:
	}
	if early { // the masters still hold the name for it, unless it was given back before the answer
		who = other.Do("WHO " + name)
		pass()
	} else { // held back as it should be, until the round settles
		pass()
		r = cl.Await(answer)
		who = other.Do("WHO " + name)
	}
	if got := strings.TrimSpace(r.Kind + " " + r.Code); got != want {
		t.Fatalf("%s: answered %q, want %s", name, r.Line, want)
	}
	if who.Kind != "OK" || who.Int("n") != 0 || len(who.Data) != 0 {
		t.Fatalf("%s: answered %q (before the round settled: %v) while the masters still held the name for it: WHO %q %v",
			name, r.Line, early, who.Line, who.Data)
	}
}
