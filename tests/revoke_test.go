package tests

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/faultproxy"
	"github.com/lock-agent/lock-agent/internal/redistest"
	"golang.org/x/sys/unix"
)

// TestRevokeTellsTheHolderBeforeAnotherAgentIsGranted: the holder's
// socket has its LOST, with the reason, before the waiter on the other
// agent is granted, and REVOKE answers once the name is released. The
// order is read from the kernel, not from when the test's goroutines ran:
// the holder's connection has no reader, and when the grant arrives its
// LOST must already wait in the holder's socket.
func TestRevokeTellsTheHolderBeforeAnotherAgentIsGranted(t *testing.T) {
	a, b, _ := twoAgents(t, 3*time.Second)
	waiter, operator := agenttest.Dial(t, b.Config.Socket.Path), agenttest.Dial(t, b.Config.Socket.Path)
	nc, err := net.Dial("unix", a.Config.Socket.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	holder := bufio.NewReader(nc)
	readLine := func() string {
		nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		l, err := holder.ReadString('\n')
		if err != nil {
			t.Fatalf("holder: %v", err)
		}
		return strings.TrimSuffix(l, "\n")
	}
	fmt.Fprintf(nc, "1 LOCK rv/one owner=w1\n")
	if l := readLine(); !strings.HasPrefix(l, "1 OK") {
		t.Fatal(l)
	}
	_, granted := waiter.Send("LOCK rv/one wait=10s")
	waiter.AwaitWaiters(1)
	start := time.Now()
	if r := operator.Do("REVOKE rv/one reason=maintenance"); r.Kind != "OK" || r.Int("n") != 1 {
		t.Fatalf("REVOKE: %q", r.Line)
	}
	took := time.Since(start)
	if r := waiter.Await(granted); r.Kind != "OK" {
		t.Fatalf("waiter: %q", r.Line)
	}
	if n := unreadBytes(t, nc) + holder.Buffered(); n == 0 {
		t.Errorf("the other agent granted the name before the holder's socket had its LOST")
	}
	if p := readLine(); !strings.HasPrefix(p, "* LOST rv/one owner=w1 ") || !strings.HasSuffix(p, " reason=revoked why=maintenance") {
		t.Errorf("push %q, want LOST with reason=revoked why=maintenance", p)
	}
	if took > time.Second {
		t.Errorf("REVOKE of a live holder took %v", took)
	}
	fmt.Fprintf(nc, "2 UNLOCK rv/one owner=w1\n")
	if l := readLine(); !strings.HasPrefix(l, "2 ERR NOT_HELD") {
		t.Errorf("UNLOCK of a revoked hold: %q", l)
	}
	t.Logf("REVOKE answered in %v", took)
}

// unreadBytes is how many bytes wait in nc's socket for a read.
func unreadBytes(t *testing.T, nc net.Conn) int {
	raw, err := nc.(*net.UnixConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if cerr := raw.Control(func(fd uintptr) { n, err = unix.IoctlGetInt(int(fd), unix.SIOCINQ) }); cerr != nil || err != nil {
		t.Fatalf("SIOCINQ: %v %v", cerr, err)
	}
	return n
}

func TestRevokeAppliesTheDelay(t *testing.T) {
	a, b, _ := twoAgents(t, 3*time.Second)
	holder, other := agenttest.Dial(t, a.Config.Socket.Path), agenttest.Dial(t, b.Config.Socket.Path)
	if r := holder.Do("LOCK rv/delay delay=800ms"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	revoked := time.Now() // the hold ends after this: its delay too
	if r := other.Do("REVOKE rv/delay"); r.Kind != "OK" || r.Int("n") != 1 {
		t.Fatalf("REVOKE: %q", r.Line)
	}
	if p := holder.Push(time.Second); !strings.HasSuffix(p, "reason=revoked") {
		t.Fatalf("push %q", p)
	}
	expectDelay(t, other, "rv/delay", revoked, 800*time.Millisecond)
}

// TestRevokeOfAHolderWhoseAgentIsCutOff: the holder's agent hears nothing
// (its links to the masters are cut). REVOKE still ends the hold within a
// lease, because the revoked record can no longer be renewed; the holder
// hears LOST (its renewals fail) before the other agent is granted.
func TestRevokeOfAHolderWhoseAgentIsCutOff(t *testing.T) {
	servers := redistest.Start(t, 3)
	const lease = 1500 * time.Millisecond
	cfg, links := proxiedConfig(t, servers, lease)
	a, b := agenttest.Start(t, cfg), agenttest.Start(t, agenttest.Config(t, servers, lease))
	holder, waiter, operator := agenttest.Dial(t, a.Config.Socket.Path), agenttest.Dial(t, b.Config.Socket.Path), agenttest.Dial(t, b.Config.Socket.Path)
	if r := holder.Do("LOCK rv/cut"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	_, granted := waiter.Send("LOCK rv/cut wait=10s")
	waiter.AwaitWaiters(1)
	for _, l := range links {
		l.SetMode(faultproxy.BlackHole)
	}
	start := time.Now()
	r := operator.Do("REVOKE rv/cut agent=proxied")
	took := time.Since(start)
	if r.Kind != "OK" || r.Int("n") != 1 || took > lease+time.Second {
		t.Fatalf("REVOKE: %q after %v, want n=1 within the lease %v", r.Line, took, lease)
	}
	lost := holder.Push(5 * time.Second)
	lostAt := time.Now()
	if !strings.HasPrefix(lost, "* LOST rv/cut") {
		t.Fatalf("push %q", lost)
	}
	g := waiter.Await(granted)
	if g.Kind != "OK" || time.Now().Before(lostAt) {
		t.Fatalf("waiter: %q", g.Line)
	}
	for _, l := range links {
		l.SetMode(faultproxy.Pass)
	}
	t.Logf("REVOKE of a cut-off holder answered in %v (lease %v)", took, lease)
}

func TestRevokeInputAndMatching(t *testing.T) {
	a, b, _ := twoAgents(t, 3*time.Second)
	holder, operator := agenttest.Dial(t, a.Config.Socket.Path), agenttest.Dial(t, b.Config.Socket.Path)
	if r := holder.Do("LOCK rv/match"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	cases := []struct{ line, kind, code, n string }{
		{"REVOKE", "ERR", "BAD_REQUEST", ""},
		{"REVOKE a b", "ERR", "BAD_REQUEST", ""},
		{"REVOKE bad!name", "ERR", "BAD_NAME", ""},
		{"REVOKE rv/match reason=Not-A-Word", "ERR", "BAD_REQUEST", ""},
		{"REVOKE rv/match agent=a=b", "ERR", "BAD_REQUEST", ""},
		{"REVOKE rv/match color=red", "ERR", "BAD_REQUEST", ""},
		{"LOCK rv/x delay=6m", "ERR", "BAD_REQUEST", ""},
		{"LOCK rv/x min_hold=25h", "ERR", "BAD_REQUEST", ""},
		{"REVOKE rv/free", "OK", "", "0"},
		{"REVOKE rv/match agent=host-b", "OK", "", "0"}, // held by host-a
		{"REVOKE rv/match agent=host-a", "OK", "", "1"},
		{"REVOKE rv/match", "OK", "", "0"}, // revoked already
	}
	for _, c := range cases {
		r := operator.Do(c.line)
		if r.Kind != c.kind || r.Code != c.code || (c.n != "" && r.Fields["n"] != c.n) {
			t.Errorf("%s: %q, want %s %s n=%s", c.line, r.Line, c.kind, c.code, c.n)
		}
	}
}

func TestRevokeNeedsTheACLVerb(t *testing.T) {
	servers := redistest.Start(t, 3)
	me := os.Getuid()
	deny := agenttest.Config(t, servers, 3*time.Second)
	deny.ACL = parseACL(t, fmt.Sprintf("rule \"all-but-revoke\" {\n uid = %d\n names = [\"**\"]\n}", me))
	allow := agenttest.Config(t, servers, 3*time.Second)
	allow.ACL = parseACL(t, fmt.Sprintf("rule \"all\" {\n uid = %d\n names = [\"**\"]\n}\nrule \"ops\" {\n uid = %d\n names = [\"rv/**\"]\n verbs = [\"revoke\"]\n}", me, me))
	denied, allowed := agenttest.Dial(t, agenttest.Start(t, deny).Config.Socket.Path), agenttest.Dial(t, agenttest.Start(t, allow).Config.Socket.Path)
	if r := denied.Do("LOCK rv/acl"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	if r := denied.Do("REVOKE rv/acl"); r.Code != "DENIED" {
		t.Fatalf("REVOKE under a rule without the verb revoke: %q", r.Line)
	}
	if r := allowed.Do("REVOKE other/acl"); r.Code != "DENIED" {
		t.Fatalf("REVOKE of a name the revoke rule does not cover: %q", r.Line)
	}
	if r := allowed.Do("REVOKE rv/acl"); r.Kind != "OK" || r.Int("n") != 1 {
		t.Fatalf("REVOKE under a rule with the verb revoke: %q", r.Line)
	}
}
