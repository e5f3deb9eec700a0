package tests

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/agent"
	"github.com/lock-agent/lock-agent/agent/acl"
	"github.com/lock-agent/lock-agent/agent/config"
	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
	"golang.org/x/sys/unix"
)

// nobodyUID is the other user the access rule tests connect as.
const nobodyUID = 65534

// dialAs connects to sock as uid:gid, for real: a child process (this test
// binary, see TestHelperConnectAs) drops to those credentials, connects,
// hands the connection back over a socket pair and exits. The agent's
// SO_PEERCRED then reports uid, as for any client of that user.
func dialAs(t *testing.T, sock string, uid, gid int) *agenttest.Conn {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("connecting as uid %d needs root; running as uid %d", uid, os.Geteuid())
	}
	if _, err := user.LookupId(strconv.Itoa(uid)); err != nil {
		t.Skipf("no user with uid %d on this host", uid)
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	child := os.NewFile(uintptr(fds[1]), "fd-return")
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperConnectAs$", "-test.count=1")
	cmd.Env = append(os.Environ(), "LOCK_AGENT_ACL_HELPER_SOCKET="+sock,
		fmt.Sprintf("LOCK_AGENT_ACL_HELPER_UID=%d", uid), fmt.Sprintf("LOCK_AGENT_ACL_HELPER_GID=%d", gid))
	cmd.ExtraFiles = []*os.File{child} // fd 3 in the child
	out, err := cmd.CombinedOutput()
	child.Close()
	if err != nil {
		t.Fatalf("helper connecting as uid %d: %v\n%s", uid, err, out)
	}
	oob := make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := unix.Recvmsg(fds[0], make([]byte, 1), oob, 0)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		t.Fatalf("no connection came back: %v\n%s", err, out)
	}
	got, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(got) != 1 {
		t.Fatalf("no connection came back: %v", err)
	}
	f := os.NewFile(uintptr(got[0]), "conn-as-"+strconv.Itoa(uid))
	defer f.Close()
	nc, err := net.FileConn(f)
	if err != nil {
		t.Fatal(err)
	}
	return agenttest.NewConn(t, nc)
}

// TestHelperConnectAs is not a test: it is the child process of dialAs.
func TestHelperConnectAs(t *testing.T) {
	sock := os.Getenv("LOCK_AGENT_ACL_HELPER_SOCKET")
	if sock == "" {
		t.Skip("the child process of dialAs")
	}
	uid, _ := strconv.Atoi(os.Getenv("LOCK_AGENT_ACL_HELPER_UID"))
	gid, _ := strconv.Atoi(os.Getenv("LOCK_AGENT_ACL_HELPER_GID"))
	fail := func(what string, err error) {
		fmt.Println(what+":", err)
		os.Exit(1)
	}
	// Every thread of the process, supplementary groups first (they need root).
	if err := syscall.Setgroups(nil); err != nil {
		fail("setgroups", err)
	}
	if err := syscall.Setgid(gid); err != nil {
		fail("setgid", err)
	}
	if err := syscall.Setuid(uid); err != nil {
		fail("setuid", err)
	}
	if os.Getuid() != uid || os.Geteuid() != uid {
		fail("still root", fmt.Errorf("uid %d euid %d", os.Getuid(), os.Geteuid()))
	}
	c, err := net.Dial("unix", sock)
	if err != nil {
		fail("connect", err)
	}
	f, err := c.(*net.UnixConn).File()
	if err != nil {
		fail("file", err)
	}
	if err := unix.Sendmsg(3, []byte{0}, unix.UnixRights(int(f.Fd())), nil, 0); err != nil {
		fail("sendmsg", err)
	}
	os.Exit(0)
}

// parseACL is the acl of an HCL acl block, through the config loader.
func parseACL(t *testing.T, block string) *acl.ACL {
	t.Helper()
	cfg, err := config.Parse([]byte("redis \"a\" { address = \"h:1\" }\nacl {\n"+block+"\n}\n"), "acl.hcl")
	if err != nil {
		t.Fatal(err)
	}
	return cfg.ACL
}

// openSocket lets every user reach the agent's socket: the directory is
// the test's, the mode is the config's.
func openSocket(t *testing.T, cfg *agent.Config) {
	cfg.Socket.Mode = 0o666
	if err := os.Chmod(filepath.Dir(cfg.Socket.Path), 0o755); err != nil {
		t.Fatal(err)
	}
}

func wantDenied(t *testing.T, r agenttest.Reply, text string) {
	t.Helper()
	if r.Kind != "ERR" || r.Code != "DENIED" || !strings.Contains(r.Line, text) {
		t.Fatalf("got %q, want ERR DENIED with %q", r.Line, text)
	}
}

func wantOK(t *testing.T, r agenttest.Reply) {
	t.Helper()
	if r.Kind != "OK" {
		t.Fatalf("got %q, want OK", r.Line)
	}
}

// TestAccessRulesForAnotherUID runs an agent with access rules and a client
// that really is uid 65534 (nobody): its rules let it lock and unlock jobs/*
// by its uid and anything under shared/ by its group; everything else that
// carries a name is DENIED with the reason, leaves nothing in the masters and
// is answered without them. Verbs without names stay allowed, and root's
// own rule is untouched by nobody's.
func TestAccessRulesForAnotherUID(t *testing.T) {
	servers := redistest.Start(t, 3)
	cfg := agenttest.Config(t, servers, time.Second)
	openSocket(t, &cfg)
	if _, err := user.LookupId(strconv.Itoa(nobodyUID)); err != nil {
		t.Skipf("no uid %d on this host", nobodyUID)
	}
	cfg.ACL = parseACL(t, `
  rule "root" {
    uid   = 0
    names = ["**"]
  }
  rule "nobody-jobs" {
    uid   = 65534
    names = ["jobs/*"]
    verbs = ["lock", "unlock"]
  }
  rule "nobody-shared" {
    gid   = 65534
    names = ["shared/**"]
  }`)
	a := agenttest.Start(t, cfg)
	sock := a.Config.Socket.Path
	nobody := dialAs(t, sock, nobodyUID, nobodyUID)

	wantOK(t, nobody.Do("LOCK jobs/x wait=2s"))
	wantOK(t, nobody.Do("LOCK shared/a/b wait=2s"))
	wantDenied(t, nobody.Do("LOCK reports/x wait=2s"), `no rule allows uid 65534 (nobody) to lock reports/x: its rules "nobody-jobs","nobody-shared" allow lock only on jobs/*,shared/**`)
	wantDenied(t, nobody.Do("LOCK jobs/a/b wait=2s"), "to lock jobs/a/b")
	wantDenied(t, nobody.Do("WHO jobs/x"), `no rule allows uid 65534 (nobody) to who jobs/x`)
	wantDenied(t, nobody.Do("EXTEND jobs/x ttl=1s"), `its rules "nobody-shared" allow extend only on shared/**`)
	wantOK(t, nobody.Do("EXTEND shared/a/b ttl=5s"))
	for _, verb := range []string{"PING", "STATUS", "HOLDS", "CANCEL 99", "HELLO client=acl"} {
		wantOK(t, nobody.Do(verb))
	}
	if r := nobody.Do("HOLDS"); r.Fields["n"] != "2" {
		t.Fatalf("a denied LOCK changed the holds: %s", r.Line)
	}
	for _, s := range servers {
		if n := s.Keys("lock-agent:{reports/x}*") + s.Keys("lock-agent:{jobs/a/b}*"); n != 0 {
			t.Fatalf("%d keys of denied names on %s", n, s.Addr)
		}
	}
	root := agenttest.Dial(t, sock)
	wantOK(t, root.Do("LOCK reports/x wait=2s"))
	if r := root.Do("WHO jobs/x"); r.Int("n") != 1 || r.Data[0]["uid"] != strconv.Itoa(nobodyUID) {
		t.Fatalf("root's WHO of nobody's hold: %s %v", r.Line, r.Data)
	}

	// With every master stopped, a denied request is still answered at
	// once, and as DENIED: it never waits for, or asks, the masters.
	for _, s := range servers {
		s.Pause()
	}
	start := time.Now()
	wantDenied(t, nobody.Do("LOCK reports/y wait=5s"), "to lock reports/y")
	wantDenied(t, nobody.Do("WHO shared2/x"), "to who shared2/x")
	if took := time.Since(start); took > time.Second {
		t.Fatalf("denied requests took %v with the masters stopped", took)
	}
	for _, s := range servers {
		s.Resume()
	}
	if r := root.Do("STATUS"); r.Int("waiters") != 0 || r.Int("holds") != 3 {
		t.Fatalf("denied requests left waiters or holds: %s", r.Line)
	}
	wantOK(t, nobody.Do("UNLOCK jobs/x"))
	wantDenied(t, nobody.Do("UNLOCK reports/x"), "to unlock reports/x")
}

// TestAccessRulesCanChangeWhileSessionsAreOpen: SetLive (what SIGHUP calls)
// replaces the rules for the requests that follow on sessions already open;
// holds granted under the old rules are kept. The client here is the test's
// own uid, so it needs no root.
func TestAccessRulesCanChangeWhileSessionsAreOpen(t *testing.T) {
	servers := redistest.Start(t, 3)
	cfg := agenttest.Config(t, servers, time.Second)
	me := os.Getuid()
	deny := cfg
	deny.ACL = parseACL(t, fmt.Sprintf("rule \"who-only\" {\n uid = %d\n names = [\"**\"]\n verbs = [\"who\"]\n}", me))
	allow := cfg
	allow.ACL = parseACL(t, fmt.Sprintf("rule \"me\" {\n uid = %d\n names = [\"live/*\"]\n}", me))
	a := agenttest.Start(t, deny)
	c := agenttest.Dial(t, a.Config.Socket.Path)

	wantDenied(t, c.Do("LOCK live/a wait=2s"), `do not allow lock`)
	a.SetLive(allow)
	wantOK(t, c.Do("LOCK live/a wait=2s"))
	wantDenied(t, c.Do("WHO other/a"), "only on live/*") // the old rule is gone
	a.SetLive(cfg)                                       // no acl block: anything goes
	wantOK(t, c.Do("LOCK other/b wait=2s"))
	a.SetLive(deny)
	wantDenied(t, c.Do("UNLOCK live/a"), "do not allow unlock")
	if r := c.Do("HOLDS"); r.Int("n") != 2 {
		t.Fatalf("new rules ended holds: %s", r.Line)
	}
}

// TestLimitsCanChangeWhileSessionsAreOpen: SetLive applies new limits to
// what comes next: a lowered max_sessions refuses the next connection, a
// lowered max_holds_per_session the next LOCK, and an idle_timeout turned
// on closes a session that was opened without one.
func TestLimitsCanChangeWhileSessionsAreOpen(t *testing.T) {
	t.Parallel() // its own masters and agents; judges no latency
	servers := redistest.Start(t, 3)
	cfg := agenttest.Config(t, servers, time.Second)
	a := agenttest.Start(t, cfg)
	sock := a.Config.Socket.Path
	c := agenttest.Dial(t, sock)
	idle := agenttest.Dial(t, sock)
	wantOK(t, idle.Do("PING"))
	wantOK(t, c.Do("LOCK lim/a wait=2s"))

	next := cfg
	next.Limits.MaxSessions = 2
	next.Limits.MaxHoldsPerSession = 1
	next.Limits.IdleTimeout = 300 * time.Millisecond
	a.SetLive(next)
	if r := c.Do("LOCK lim/b wait=2s"); r.Code != "LIMIT" || !strings.Contains(r.Line, "max_holds_per_session") {
		t.Fatalf("LOCK over the new max_holds_per_session: %s", r.Line)
	}
	if line := firstLine(t, sock); !strings.HasPrefix(line, "- ERR LIMIT") || !strings.Contains(line, "max_sessions=2") {
		t.Fatalf("a session over the new max_sessions: %q", line)
	}
	if p := idle.Push(3 * time.Second); p != "* BYE reason=idle" {
		t.Fatalf("the idle session opened before the new idle_timeout: %q", p)
	}
	if p := c.Push(500 * time.Millisecond); p != "" { // it holds a name: not idle
		t.Fatalf("the session with a hold: %q", p)
	}
	next.Limits.IdleTimeout = 0
	a.SetLive(next)
	wantOK(t, c.Do("UNLOCK lim/a"))
	if p := c.Push(800 * time.Millisecond); p != "" {
		t.Fatalf("idle_timeout turned off, yet: %q", p)
	}
}

// TestSetLiveRacesNoRequest replaces limits and rules over and over while
// sessions open, lock, ask WHO, unlock and close: under -race, any read of
// them that is not through the live pointer is a failure.
func TestSetLiveRacesNoRequest(t *testing.T) {
	servers := redistest.Start(t, 3)
	cfg := agenttest.Config(t, servers, time.Second)
	a := agenttest.Start(t, cfg)
	sock := a.Config.Socket.Path
	other := cfg
	other.ACL = parseACL(t, fmt.Sprintf("rule \"me\" {\n uid = %d\n names = [\"race/**\"]\n}", os.Getuid()))
	other.Limits.IdleTimeout = time.Minute
	other.Limits.MaxHoldsPerSession = 500
	stop := make(chan struct{})
	var reloads sync.WaitGroup
	reloads.Add(1)
	go func() {
		defer reloads.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			if i%2 == 0 {
				a.SetLive(other)
			} else {
				a.SetLive(cfg)
			}
		}
	}()
	var clients sync.WaitGroup
	for i := range 4 {
		clients.Add(1)
		go func() {
			defer clients.Done()
			for j := range 20 {
				c := agenttest.Dial(t, sock)
				name := fmt.Sprintf("race/%d/%d", i, j)
				if r := c.Do("LOCK " + name + " wait=2s"); r.Kind != "OK" {
					t.Errorf("%s: %s", name, r.Line)
				}
				c.Do("WHO " + name)
				c.Do("UNLOCK " + name)
				c.Close()
			}
		}()
	}
	clients.Wait()
	close(stop)
	reloads.Wait()
}

// firstLine connects and returns the first line the agent sends unasked.
func firstLine(t *testing.T, sock string) string {
	t.Helper()
	nc, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, _ := bufio.NewReader(nc).ReadString('\n')
	return strings.TrimSpace(line)
}

// TestBinarySIGHUPAppliesAccessRules runs the real binary with rules that
// deny uid 65534 (nobody); SIGHUP with rules that allow it (and a lower
// max_holds_per_session) lets the same connection lock at once, within the
// new limit; an invalid file (an unknown user) is refused at its line and
// the running rules stay.
func TestBinarySIGHUPAppliesAccessRules(t *testing.T) {
	t.Parallel() // see TestMain
	if os.Geteuid() != 0 {
		t.Skipf("connecting as uid %d needs root; running as uid %d", nobodyUID, os.Geteuid())
	}
	const rootRule = "acl {\n  rule \"root\" {\n    uid   = 0\n    names = [\"**\"]\n  }\n"
	cmd, logs, cfgPath, sock, servers := binaryAgent(t, rootRule+"}\n")
	// The socket accepts connections a moment before the agent gives it its
	// configured mode (0660): widened before that, it was narrowed again,
	// and uid 65534 was refused the connection (a parallel run beside two
	// CPU hogs). The agent logs "listening" once the mode is set.
	waitForLog(t, logs, "listening")
	for path, mode := range map[string]os.FileMode{filepath.Dir(sock): 0o755, sock: 0o666} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
	}
	root := agenttest.Dial(t, sock)
	awaitQuorum(t, root)
	nobody := dialAs(t, sock, nobodyUID, nobodyUID)
	wantDenied(t, nobody.Do("LOCK jobs/x wait=2s"), "no rule allows uid 65534 (nobody) to lock jobs/x: no rule is for this uid or its groups")

	writeAgentConfig(t, cfgPath, sock, servers, rootRule+"  rule \"nobody\" {\n    user  = \"nobody\"\n    names = [\"jobs/*\"]\n  }\n}\nlimits { max_holds_per_session = 1 }\n")
	cmd.Process.Signal(syscall.SIGHUP)
	waitForLog(t, logs, "SIGHUP: applied: setting=ACL")
	waitForLog(t, logs, "SIGHUP: applied: setting=Limits.MaxHoldsPerSession old=1000 new=1")
	wantOK(t, nobody.Do("LOCK jobs/x wait=5s"))
	if r := nobody.Do("LOCK jobs/y wait=2s"); r.Code != "LIMIT" {
		t.Fatalf("LOCK over the reloaded max_holds_per_session: %s", r.Line)
	}

	// Line 8 of the file: agent, socket, three masters, then this.
	writeAgentConfig(t, cfgPath, sock, servers, "acl {\n  rule \"nobody\" {\n    user  = \"no-such-user-7f3a\"\n    names = [\"**\"]\n  }\n}\n")
	cmd.Process.Signal(syscall.SIGHUP)
	waitForLog(t, logs, "config not reloaded, keeping the running one")
	if l := logs.String(); !strings.Contains(l, "agent.hcl:8: Invalid acl rule") || !strings.Contains(l, "no-such-user-7f3a") {
		t.Errorf("the reload error does not say where and what:\n%s", logs.String())
	}
	wantOK(t, nobody.Do("UNLOCK jobs/x"))
	wantOK(t, nobody.Do("LOCK jobs/z wait=5s"))
	wantDenied(t, nobody.Do("LOCK reports/x wait=2s"), `its rules "nobody" allow lock only on jobs/*`)
	if r := root.Do("WHO jobs/z"); r.Int("n") != 1 {
		t.Fatalf("root's rule after the refused reload: %s", r.Line)
	}
	stopAndCheckReleased(t, cmd, syscall.SIGTERM, nobody, servers, logs)
}

// TestBinaryValidateChecksAccessRules: `lock-agent validate` reports every
// bad rule at its line, in one run, and exits 2.
func TestBinaryValidateChecksAccessRules(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "agent.hcl")
	os.WriteFile(cfg, []byte(`redis "a" { address = "h:1" }
acl {
  rule "no-one" {
    names = ["x"]
  }
  rule "bad-glob" {
    uid   = 1
    names = ["jobs/a**"]
  }
  rule "bad-verb" {
    gid   = 1
    names = ["x"]
    verbs = ["lock", "steal"]
  }
  rule "ghost" {
    user  = "no-such-user-7f3a"
    names = ["x"]
  }
}
`), 0o600)
	out, err := exec.Command(binary(t), "validate", "-config", cfg).CombinedOutput()
	for _, want := range []string{`agent.hcl:3: Invalid acl rule "no-one"`, "for no one", `agent.hcl:8: Invalid acl rule "bad-glob".names`,
		`agent.hcl:13: Invalid acl rule "bad-verb".verbs: unknown verb "steal"`, `agent.hcl:16: Invalid acl rule "ghost".user: no user "no-such-user-7f3a"`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("%q missing", want)
		}
	}
	if exitCode(err) != 2 || t.Failed() {
		t.Fatalf("exit %d:\n%s", exitCode(err), out)
	}
}

// awaitQuorum polls STATUS until a majority of the masters is up (up to
// 10s): a loaded machine may leave one master's first probes timed out.
func awaitQuorum(t *testing.T, c *agenttest.Conn) {
	t.Helper()
	var r agenttest.Reply
	lockagenttest.Eventually(t, 10*time.Second, func() bool {
		r = c.Do("STATUS")
		up := 0
		for _, d := range r.Data {
			if d["state"] == "up" {
				up++
			}
		}
		return up >= int(r.Int("quorum")) && up > 0
	}, "never a quorum of masters up: %v", &r.Data)
}
