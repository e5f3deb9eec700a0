package tests

// Hostile review tests: each one drives real agents over real redis-servers
// into a sequence that the safety work claims cannot happen.

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// cutProxy forwards TCP to one redis-server until Cut: then it closes every
// connection it carries and refuses new ones (a partition between one agent
// and that master; other agents keep talking to it directly).
type cutProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	delay  atomic.Int64
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *cutProxy) Addr() string { return p.ln.Addr().String() }

// agentsBehindProxies starts agent A, which reaches the masters from the
// first-th on through cut proxies (one per master, in order), and agent B,
// which reaches every master directly.
//
// Both run with the margin between a holder's validity and its lease on the
// masters that production's defaults give (lease 15s × drift 0.01 = 150ms):
// at a 1s lease the default drift leaves 12ms, and a LOST pushed on time can
// reach its client after that when the machine is loaded (a scheduling delay
// the drift factor is there to absorb), which these tests would misread as
// an overlap.
func agentsBehindProxies(t *testing.T, servers []*redistest.Server, lease time.Duration, first int) (a, b *agenttest.Agent, proxies []*cutProxy) {
	t.Helper()
	drift := productionMargin(lease)
	cfgA := agenttest.Config(t, servers, lease)
	cfgA.Lock.DriftFactor = drift
	cfgA.AgentID = "A"
	for i := first; i < len(cfgA.Masters); i++ {
		p := newCutProxy(t, servers[i].Addr)
		proxies = append(proxies, p)
		cfgA.Masters[i].Address = p.Addr()
	}
	cfgB := agenttest.Config(t, servers, lease)
	cfgB.Lock.DriftFactor = drift
	cfgB.AgentID = "B"
	return agenttest.Start(t, cfgA), agenttest.Start(t, cfgB), proxies
}

// productionMargin is the drift factor that gives lease the margin of
// production's defaults, 150ms (at least the default 0.01).
func productionMargin(lease time.Duration) float64 {
	return max(0.01, float64(150*time.Millisecond)/float64(lease))
}

func (p *cutProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns = append(p.conns, c, s)
		p.wg.Add(2)
		p.mu.Unlock()
		go func() { defer p.wg.Done(); io.Copy(s, c); s.Close() }()
		go func() { defer p.wg.Done(); p.copyReplies(c, s); c.Close() }()
	}
}

// copyReplies copies the master's replies to the agent, each read held back
// by the proxy's delay (so replies arrive late, in order).
func (p *cutProxy) copyReplies(c, s net.Conn) {
	buf := make([]byte, 64<<10)
	for {
		n, err := s.Read(buf)
		if n > 0 {
			if d := time.Duration(p.delay.Load()); d > 0 {
				time.Sleep(d)
			}
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Delay holds back the master's replies by d (0: none).
func (p *cutProxy) Delay(d time.Duration) { p.delay.Store(int64(d)) }

// Cut drops every connection and refuses new ones.
func (p *cutProxy) Cut() {
	p.mu.Lock()
	p.cut = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
}

// Restore accepts connections again.
func (p *cutProxy) Restore() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

func (p *cutProxy) close() {
	p.ln.Close()
	p.Cut()
	p.wg.Wait()
}

func atoiOr(s string) int64 {
	s = strings.TrimSpace(s)
	var n int64
	neg := false
	for i, c := range s {
		if i == 0 && c == '-' {
			neg = true
			continue
		}
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n
}

// rdbServer is a redis-server with RDB persistence in its own directory, as
// a stock redis.conf has it (save 3600 1 300 100 60 10000): a crash loses
// the writes after the last snapshot, but not the epoch marker.
type rdbServer struct {
	t    *testing.T
	Addr string
	port string
	dir  string
	cmd  *exec.Cmd
}

func startRDB(t *testing.T) *rdbServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, port, _ := net.SplitHostPort(addr)
	s := &rdbServer{t: t, Addr: addr, port: port, dir: t.TempDir()}
	s.launch()
	t.Cleanup(s.kill)
	return s
}

func (s *rdbServer) launch() {
	s.t.Helper()
	s.cmd = exec.Command("redis-server", "--port", s.port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", s.dir, "--dbfilename", "dump.rdb", "--protected-mode", "no", "--loglevel", "warning")
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	lockagenttest.Eventually(s.t, 5*time.Second, func() bool { _, err := s.Do("PING"); return err == nil }, "rdb redis-server did not start")
}

// crash kills the server with SIGKILL and starts it again on the same port:
// it loads its last snapshot.
func (s *rdbServer) crash() {
	s.kill()
	s.launch()
}

func (s *rdbServer) kill() {
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Kill()
		s.cmd.Wait()
	}
}

func (s *rdbServer) Do(args ...string) (string, error) {
	c, err := net.DialTimeout("tcp", s.Addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "", err
	}
	if strings.HasPrefix(line, "-") {
		return "", fmt.Errorf("%s", strings.TrimSpace(line))
	}
	return strings.TrimSpace(line), nil
}

// TestHostileStaleSnapshotRestartVotesAtOnce: a master that crashes and
// reloads an RDB snapshot taken before a grant has lost that grant but kept
// its epoch marker, so the gate lets it vote at once; nothing (not the
// safety check, not the probe) notices the restart. With the hold on {A, C}
// (B was down at the grant) and C restored from a snapshot, {B, C} grant the
// name to a second holder while the first still holds it.
func TestHostileStaleSnapshotRestartVotesAtOnce(t *testing.T) {
	t.Parallel() // see TestMain
	rs := redistest.Start(t, 2)
	c := startRDB(t)
	servers := []*redistest.Server{rs[0], rs[1], {Addr: c.Addr}}
	const lease = 3 * time.Second
	cfg1 := agenttest.Config(t, servers, lease)
	cfg1.AgentID = "one"
	cfg2 := agenttest.Config(t, servers, lease)
	cfg2.AgentID = "two"
	a1 := agenttest.Start(t, cfg1)
	a2 := agenttest.Start(t, cfg2)
	if _, err := c.Do("SAVE"); err != nil { // the periodic snapshot: marker in it, no hold
		t.Fatal(err)
	}

	one := agenttest.Dial(t, a1.Config.Socket.Path)
	two := agenttest.Dial(t, a2.Config.Socket.Path)
	rs[1].Pause() // B is down at the grant
	one.AwaitMasters("down", 1)
	r1 := one.Do("LOCK snap")
	if r1.Kind != "OK" {
		t.Fatalf("lock: %s", r1.Line)
	}
	c.crash() // C reloads the snapshot: the hold is gone, the marker is not
	rs[1].Resume()
	var r agenttest.Reply
	if !pollFor(3*time.Second, 5*time.Millisecond, func() bool { r = two.Do("LOCK snap wait=0"); return r.Kind == "OK" }) {
		t.Log("two was never granted: held")
		return
	}
	// HOLDS is answered after any LOST the agent queued: a hold it
	// lists with validity left was not lost when two was granted.
	h := one.Do("HOLDS")
	if h.Int("n") != 1 || atoiOr(h.Data[0]["validity"]) <= 0 {
		t.Logf("holder one lost it first (%+v): no overlap this time", h.Data)
		return
	}
	t.Fatalf("OVERLAP: two granted (%s) while one still holds snap (granted %s; HOLDS after the grant: validity=%sms); status of C: %+v",
		r.Line, r1.Line, h.Data[0]["validity"], two.Do("STATUS").Data[2])
}

// TestHostileStaleSnapshotRepeatsAFence: the same stale reload rolls back the
// fence counter with the marker intact, so the hybrid clock never restarts it
// from the master's time: a later holder is handed the fence an earlier one
// already has (here while the earlier one still holds the name, too).
func TestHostileStaleSnapshotRepeatsAFence(t *testing.T) {
	t.Parallel() // see TestMain
	rs := redistest.Start(t, 2)
	c := startRDB(t)
	servers := []*redistest.Server{rs[0], rs[1], {Addr: c.Addr}}
	const lease = 3 * time.Second
	cfg1 := agenttest.Config(t, servers, lease)
	cfg1.AgentID = "one"
	cfg2 := agenttest.Config(t, servers, lease)
	cfg2.AgentID = "two"
	a1 := agenttest.Start(t, cfg1)
	a2 := agenttest.Start(t, cfg2)
	one := agenttest.Dial(t, a1.Config.Socket.Path)
	two := agenttest.Dial(t, a2.Config.Socket.Path)
	if r := one.Do("LOCK fr"); r.Kind != "OK" { // every master's counter in step
		t.Fatalf("lock: %s", r.Line)
	}
	one.Do("UNLOCK fr")
	lockagenttest.Eventually(t, 5*time.Second, func() bool { // the release reached C: the snapshot holds no hold
		keys, _ := c.Do("KEYS", "lock-agent:{fr}:h:*")
		return keys == "*0"
	}, "C still has the released hold")
	if _, err := c.Do("SAVE"); err != nil {
		t.Fatal(err)
	}
	rs[1].Pause()
	one.AwaitMasters("down", 1)
	r1 := one.Do("LOCK fr")
	if r1.Kind != "OK" {
		t.Fatalf("lock: %s", r1.Line)
	}
	c.crash()
	rs[1].Resume()
	// One attempt once every master answers again (C up, or quarantined
	// if its probe already found the stale reload): failed attempts would
	// count the survivors' counters up.
	two.AwaitMasters("down", 0)
	two.Do("WHO fr") // reconnects two's rounds connection to C (WHO writes nothing)
	two.Do("WHO fr")
	for i, s := range servers {
		v, _ := s.Do("GET", "lock-agent:{fr}:fence")
		t.Logf("master %d counter %s", i, v)
	}
	var r agenttest.Reply
	if !pollFor(3*time.Second, 5*time.Millisecond, func() bool { r = two.Do("LOCK fr wait=0"); t.Logf("two: %s", r.Line); return r.Kind == "OK" }) {
		t.Log("never granted")
		return
	}
	if r.Int("fence") <= r1.Int("fence") {
		t.Fatalf("FENCE REPEATED: first holder got %s, a later holder got %s", r1.Line, r.Line)
	}
	t.Logf("fences %d then %d", r1.Int("fence"), r.Int("fence"))
}

// TestHostilePartitionedHolderIsLostFirst is the baseline of the EXTEND
// tests: without EXTEND, a watchdog holder cut off from every master at a
// random phase of its renewal hears LOST before another agent is granted.
func TestHostilePartitionedHolderIsLostFirst(t *testing.T) {
	servers := redistest.Start(t, 3)
	const lease = time.Second
	a, b, proxies := agentsBehindProxies(t, servers, lease, 0)
	holder := agenttest.Dial(t, a.Config.Socket.Path)
	other := agenttest.Dial(t, b.Config.Socket.Path)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 6))
	for attempt := range soak(3, 6) {
		if r := holder.Do("LOCK pl wait=3s"); r.Kind != "OK" {
			t.Fatalf("lock: %s", r.Line)
		}
		time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond)
		k := 2 + rng.IntN(2) // cut two or all three
		for _, i := range rng.Perm(3)[:k] {
			proxies[i].Cut()
		}
		cut := time.Now()
		lostAt := make(chan time.Time, 1)
		go func() { // the LOST's arrival, stamped as the holder's reader delivers it
			select {
			case <-holder.Pushes():
				lostAt <- time.Now()
			case <-time.After(3 * time.Second):
				lostAt <- time.Time{}
			}
		}()
		pollFor(2*time.Second-time.Since(cut), 2*time.Millisecond, func() bool {
			r := other.Do("LOCK pl wait=0")
			if r.Kind != "OK" {
				return false
			}
			granted := time.Now()
			l := <-lostAt
			if l.IsZero() || l.After(granted) {
				t.Fatalf("OVERLAP on attempt %d (%d of 3 cut): granted %s %v after the cut; the holder's LOST came %v later",
					attempt, k, r.Line, granted.Sub(cut), l.Sub(granted))
			}
			t.Logf("attempt %d (%d cut): LOST %v after the cut, %v before the grant", attempt, k, l.Sub(cut), granted.Sub(l))
			other.Do("UNLOCK pl")
			return true
		})
		for _, p := range proxies {
			p.Restore()
		}
		holder.Do("UNLOCK pl")
		for holder.Push(20*time.Millisecond) != "" {
		}
		holder.AwaitMasters("up", 3)
	}
}

// TestHostileReplacedDataVotesAtOnce: a master whose data is replaced by a
// copy of another master's (here: briefly a replica of it, as a
// mis-pointed REPLICAOF or a restore from the wrong backup would do) carries
// that master's epoch marker. The probe even sees the epoch change and logs
// "master lost its data", but nothing quarantines it: it votes at once
// without the holds it granted.
func TestHostileReplacedDataVotesAtOnce(t *testing.T) {
	t.Parallel() // see TestMain
	servers := redistest.Start(t, 3)
	const lease = 3 * time.Second
	cfg1 := agenttest.Config(t, servers, lease)
	cfg1.AgentID = "one"
	cfg2 := agenttest.Config(t, servers, lease)
	cfg2.AgentID = "two"
	a1 := agenttest.Start(t, cfg1)
	a2 := agenttest.Start(t, cfg2)
	one := agenttest.Dial(t, a1.Config.Socket.Path)
	two := agenttest.Dial(t, a2.Config.Socket.Path)
	t.Cleanup(func() { servers[1].Resume(); servers[2].Do("REPLICAOF", "NO", "ONE") })
	before, _ := servers[2].Do("HGET", "lock-agent:epoch", "epoch")

	servers[1].Pause() // B is down at the grant: the hold is on {A, C}
	one.AwaitMasters("down", 1)
	r1 := one.Do("LOCK rep")
	if r1.Kind != "OK" {
		t.Fatalf("lock: %s", r1.Line)
	}
	servers[1].Resume()
	if _, err := servers[1].Do("CONFIG", "SET", "repl-diskless-sync-delay", "0"); err != nil {
		t.Fatal(err)
	}
	// A replica writes the RDB it receives into its dir (the test's working
	// directory), where every redistest server started later would load it:
	// have it load the RDB from the socket instead, and check.
	if _, err := servers[2].Do("CONFIG", "SET", "repl-diskless-load", "swapdb"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := os.Stat("dump.rdb"); err == nil {
			os.Remove("dump.rdb")
			t.Error("a dump.rdb was left in the working directory")
		}
	})
	host, port, _ := net.SplitHostPort(servers[1].Addr)
	if _, err := servers[2].Do("REPLICAOF", host, port); err != nil {
		t.Fatal(err)
	}
	lockagenttest.Eventually(t, 5*time.Second, func() bool {
		info, _ := servers[2].Info("replication")
		return strings.Contains(info, "master_link_status:up")
	}, "C never synced")
	servers[2].Do("REPLICAOF", "NO", "ONE")
	after, _ := servers[2].Do("HGET", "lock-agent:epoch", "epoch")
	t.Logf("C's epoch marker: %s before, %s after (B's)", before, after)
	var r agenttest.Reply
	if !pollFor(3*time.Second, 5*time.Millisecond, func() bool { r = two.Do("LOCK rep wait=0"); return r.Kind == "OK" }) {
		t.Log("never granted")
		return
	}
	h := one.Do("HOLDS")
	if h.Int("n") != 1 || atoiOr(h.Data[0]["validity"]) <= 0 {
		t.Logf("one lost it first (%+v)", h.Data)
		return
	}
	t.Fatalf("OVERLAP: two granted (%s) while one holds rep (%s; HOLDS after the grant: validity=%sms); C: %+v",
		r.Line, r1.Line, h.Data[0]["validity"], two.Do("STATUS").Data[2])
}

// TestHostileExtendedWatchdogHoldOutlivesItsKeys: EXTEND of a watchdog hold
// used to set the hold's deadline to now+ttl, while the watchdog's next
// renewal set the keys' lease back to lock.lease: once agent A was cut off
// from the masters, its keys expired lock.lease after the last renewal while
// A still reported the hold valid (and sent no LOST) until the EXTEND's
// deadline, and agent B was granted the name meanwhile. Now EXTEND only
// gives the hold an end, and its validity stays the lease's.
func TestHostileExtendedWatchdogHoldOutlivesItsKeys(t *testing.T) {
	t.Parallel() // see TestMain
	servers := redistest.Start(t, 3)
	const lease = time.Second
	a, b, proxies := agentsBehindProxies(t, servers, lease, 0)

	holder := agenttest.Dial(t, a.Config.Socket.Path)
	if r := holder.Do("LOCK ext"); r.Kind != "OK" {
		t.Fatalf("lock: %s", r.Line)
	}
	if r := holder.Do("EXTEND ext ttl=10s"); r.Kind != "OK" || r.Int("validity") > lease.Milliseconds() {
		t.Fatalf("extend: %s", r.Line)
	}
	// Let the watchdog renew at least once (every lease/3): the keys go back
	// to a 1s lease, the hold's deadline stays at ~10s. A round may have
	// been under way at the EXTEND: two more end after it.
	const rounds = "lock_agent_renewal_round_duration_seconds_count"
	before := metric(t, a, rounds)
	lockagenttest.Eventually(t, 5*time.Second, func() bool { return metric(t, a, rounds) >= before+2 }, "the watchdog never renewed after the EXTEND")
	maxPTTL := int64(0)
	for _, s := range servers {
		out, _ := s.Do("EVAL", "local k = redis.call('KEYS', ARGV[1]); local m = -2; for _, x in ipairs(k) do m = math.max(m, redis.call('PTTL', x)) end; return m", "0", "lock-agent:{ext}:h:*")
		if n := atoiOr(out); n > maxPTTL {
			maxPTTL = n
		}
	}
	t.Logf("after a watchdog renewal: longest holder-key PTTL on the masters = %dms", maxPTTL)

	// Partition A from every master.
	for _, p := range proxies {
		p.Cut()
	}
	gone := pollFor(3*lease, 10*time.Millisecond, func() bool { return keysGone(servers, "ext") }) // the keys' lease runs out on the masters
	t.Logf("holder keys gone from every master: %v", gone)

	other := agenttest.Dial(t, b.Config.Socket.Path)
	r := other.Do("LOCK ext wait=0")
	grantedB := time.Now()
	if r.Kind != "OK" {
		t.Logf("B was refused (%s): no overlap this time", r.Line)
		return
	}
	// Is A's hold still live? A LOST push before B's grant would end it.
	if p := holder.Push(0); p != "" {
		t.Logf("A was told %q before B's grant", p)
		return
	}
	h := holder.Do("HOLDS")
	if h.Int("n") == 1 && atoiOr(h.Data[0]["validity"]) > 0 {
		t.Fatalf("OVERLAP: B granted %s at %v while A still holds ext with validity=%sms and no LOST (keys' PTTL was %dms after a renewal)",
			r.Line, grantedB.Format("15:04:05.000"), h.Data[0]["validity"], maxPTTL)
	}
}

// TestHostileShortExtendDuringARenewalRound: the converse of the test above.
// A renewal round that started before an EXTEND ttl=200ms (kept in flight by
// a master that does not answer, which it waits for up to lease/4) lands its
// PEXPIRE lease before the EXTEND's PEXPIRE 200ms, and then apply() raises
// the hold's deadline to round start + lease − drift. The keys expire 200ms
// after the EXTEND; the holder is told nothing until a later round finds
// them gone, and another agent is granted the name meanwhile.
func TestHostileShortExtendDuringARenewalRound(t *testing.T) {
	a, b, servers := twoAgents(t, time.Second)
	holder := agenttest.Dial(t, a.Config.Socket.Path)
	other := agenttest.Dial(t, b.Config.Socket.Path)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 5))
	attempts := soak(8, 25)
	for attempt := range attempts {
		if r := holder.Do("LOCK se wait=3s"); r.Kind != "OK" {
			t.Fatalf("lock: %s", r.Line)
		}
		servers[2].Pause()
		time.Sleep(time.Duration(rng.IntN(333)) * time.Millisecond)
		ext := holder.Do("EXTEND se ttl=200ms")
		extended := time.Now()
		resumed := false
		pollFor(900*time.Millisecond-time.Since(extended), 5*time.Millisecond, func() bool {
			if !resumed && time.Since(extended) > 400*time.Millisecond {
				servers[2].Resume()
				resumed = true
			}
			r := other.Do("LOCK se wait=0")
			if r.Kind != "OK" {
				return false
			}
			if p := holder.Push(0); p == "" {
				h := holder.Do("HOLDS")
				if h.Int("n") == 1 && atoiOr(h.Data[0]["validity"]) > 0 {
					t.Fatalf("OVERLAP on attempt %d: %s granted %v after EXTEND (%s) while the holder still holds se with validity=%sms and no LOST",
						attempt, r.Line, time.Since(extended), ext.Line, h.Data[0]["validity"])
				}
			}
			other.Do("UNLOCK se")
			return true
		})
		if !resumed {
			servers[2].Resume()
		}
		holder.Do("UNLOCK se")
		for holder.Push(50*time.Millisecond) != "" {
		}
		other.AwaitMasters("up", 3)
		holder.AwaitMasters("up", 3)
	}
	t.Logf("no overlap in %d attempts", attempts)
}

// TestHostilePipelinedExtendsDisagree: two EXTENDs of one ttl= hold sent
// back to back run in their own goroutines; nothing orders their PEXPIREs on
// the masters with their watchdog.Extend calls. When the masters apply
// ttl=10s then ttl=100ms but the agent records the 10s deadline last, the
// keys are gone 100ms later while the holder is told it holds for 10s.
func TestHostilePipelinedExtendsDisagree(t *testing.T) {
	t.Parallel() // see TestMain
	a, b, servers := twoAgents(t, time.Second)
	holder := agenttest.Dial(t, a.Config.Socket.Path)
	other := agenttest.Dial(t, b.Config.Socket.Path)
	attempts := soak(12, 40)
	for attempt := range attempts {
		if r := holder.Do("LOCK pe ttl=5s wait=3s"); r.Kind != "OK" {
			t.Fatalf("lock: %s", r.Line)
		}
		_, long := holder.Send("EXTEND pe ttl=10s")
		_, short := holder.Send("EXTEND pe ttl=100ms")
		rl, rs := holder.Await(long), holder.Await(short)
		pollFor(250*time.Millisecond, 5*time.Millisecond, func() bool { return keysGone(servers, "pe") }) // the 100ms ttl, if the masters applied it last
		if r := other.Do("LOCK pe wait=0"); r.Kind == "OK" {
			if p := holder.Push(0); p == "" {
				h := holder.Do("HOLDS")
				if h.Int("n") == 1 && atoiOr(h.Data[0]["validity"]) > 0 {
					t.Fatalf("OVERLAP on attempt %d: %s granted while the holder holds pe with validity=%sms, no LOST (extends answered %q, %q)",
						attempt, r.Line, h.Data[0]["validity"], rl.Line, rs.Line)
				}
			}
			other.Do("UNLOCK pe")
		}
		holder.Do("UNLOCK pe")
		for holder.Push(20*time.Millisecond) != "" {
		}
	}
	t.Logf("no overlap in %d attempts", attempts)
}

// TestHostileFailedShorteningExtend: EXTEND ttl=100ms of a ttl=10s hold is
// executed by every master, but two of the answers come late (slow
// replies), so the agent counts it as failed (NO_QUORUM) and keeps the old
// 10s deadline. A failed EXTEND may have been applied: the keys are gone
// 100ms later, another agent is granted the name, and the holder still
// holds it with ~10s of validity and no LOST.
func TestHostileFailedShorteningExtend(t *testing.T) {
	servers := redistest.Start(t, 3)
	a, b, proxies := agentsBehindProxies(t, servers, time.Second, 1) // m1 and m2
	holder := agenttest.Dial(t, a.Config.Socket.Path)
	other := agenttest.Dial(t, b.Config.Socket.Path)
	if r := holder.Do("LOCK fx ttl=10s"); r.Kind != "OK" {
		t.Fatalf("lock: %s", r.Line)
	}
	for _, p := range proxies {
		p.Delay(150 * time.Millisecond) // replies of m1 and m2 come after master_timeout
	}
	ext := holder.Do("EXTEND fx ttl=100ms")
	for _, p := range proxies {
		p.Delay(0)
	}
	t.Logf("EXTEND answered %s", ext.Line)
	if !pollFor(2*time.Second, 5*time.Millisecond, func() bool { return keysGone(servers, "fx") }) { // the 100ms ttl the masters applied
		t.Log("the keys outlived the 100ms ttl")
	}
	r := other.Do("LOCK fx wait=0")
	if r.Kind != "OK" {
		t.Logf("B refused (%s)", r.Line)
		return
	}
	h := holder.Do("HOLDS")
	if h.Int("n") == 1 && atoiOr(h.Data[0]["validity"]) > 0 {
		t.Fatalf("OVERLAP: B granted %s while A holds fx with validity=%sms and no LOST (its EXTEND answered %q)",
			r.Line, h.Data[0]["validity"], ext.Line)
	}
}
