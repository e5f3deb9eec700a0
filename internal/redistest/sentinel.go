package redistest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// StartWith starts one redis-server with more arguments (e.g.
// "--min-replicas-to-write", "1"), which a Restart keeps.
func StartWith(t testing.TB, args ...string) *Server {
	t.Helper()
	Start(t, 0) // the same skip-or-fail when redis-server is missing
	return start(t, args...)
}

// StartReplica starts a replica of primary (through via if it is not "":
// another address of the primary, a proxy), with more arguments, and
// waits until it is in sync.
func StartReplica(t testing.TB, primary *Server, via string, args ...string) *Server {
	t.Helper()
	if via == "" {
		via = primary.Addr
	}
	// A full sync waits 5s by default for more replicas to share it.
	if _, err := primary.Do("CONFIG", "SET", "repl-diskless-sync-delay", "0"); err != nil {
		t.Fatal(err)
	}
	host, port, _ := strings.Cut(via, ":")
	r := StartWith(t, append([]string{"--replicaof", host, port, "--repl-diskless-sync-delay", "0"}, args...)...)
	r.AwaitInfo(10*time.Second, "replication", "master_link_status", "up")
	primary.awaitAcks(t)
	return r
}

// awaitAcks waits until every replica of s acknowledged a write: after a
// sync the primary sends a replica nothing more until its first
// acknowledgement (up to a second), and a primary killed meanwhile would
// leave it without writes made since. The write is a PUBLISH: replicated,
// but it leaves no key; WAIT (on the same connection) waits for it.
func (s *Server) awaitAcks(t testing.TB) {
	t.Helper()
	info, err := s.Info("replication")
	if err != nil {
		t.Fatal(err)
	}
	replicas := InfoField(info, "connected_slaves")
	conn, err := s.dial()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(15 * time.Second))
	if _, err := do(conn, "PUBLISH", "redistest:sync", "1"); err != nil {
		t.Fatal(err)
	}
	if n, err := do(conn, "WAIT", replicas, "10000"); err != nil || n != replicas {
		t.Fatalf("redistest: %s: %s of %s replicas acknowledged a write in 10s (%v)", s.Addr, n, replicas, err)
	}
}

// AwaitInfo waits until the server's INFO section reports field as want,
// polling it every 10ms, and fails the test after timeout. It is how the
// helpers wait for a replica to sync or a primary to lose its replicas:
// on what the server says, not for a time.
func (s *Server) AwaitInfo(timeout time.Duration, section, field, want string) {
	s.t.Helper()
	var got string
	deadline := time.Now().Add(timeout)
	for {
		info, err := s.Info(section)
		if got = InfoField(info, field); err == nil && got == want {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("redistest: %s: INFO %s has %s:%q after %v, want %q (%v)", s.Addr, section, field, got, timeout, want, err)
		}
		time.Sleep(10 * time.Millisecond) // polling: INFO has no way to wait
	}
}

// InfoField is the value of field in INFO's text ("" if absent).
func InfoField(info, field string) string {
	for _, line := range strings.Split(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && k == field {
			return v
		}
	}
	return ""
}

// MasterSet is one primary a Sentinel watches, by the name clients ask for
// (the master set), at Addr (the primary's, or a proxy's in front of it).
type MasterSet struct {
	Name, Addr string
	// DownAfter is how long the primary must not answer before the
	// Sentinel fails it over; default 2s. With 500ms a CI run on a slow,
	// busy host had the Sentinel fail over a primary no fault had touched
	// (behind a faultproxy in the race-built test process, which a stall
	// kept from answering a PING), before the test began
	// (TestFailoverSplitBrain: "never 3 masters up", m0 at its replica).
	DownAfter time.Duration
}

// Sentinel is a redis-server running as a Sentinel (quorum 1: it alone
// decides a failover).
type Sentinel struct{ *Server }

// StartSentinel starts a Sentinel that watches the master sets, and waits
// until it knows each primary and as many replicas as each has.
func StartSentinel(t testing.TB, sets ...MasterSet) *Sentinel {
	t.Helper()
	Start(t, 0)
	dir, err := os.MkdirTemp("", "sentinel")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var conf strings.Builder
	for _, m := range sets {
		host, port, _ := strings.Cut(m.Addr, ":")
		down := cmp(m.DownAfter, 2*time.Second)
		fmt.Fprintf(&conf, "sentinel monitor %s %s %s 1\n", m.Name, host, port)
		fmt.Fprintf(&conf, "sentinel down-after-milliseconds %s %d\n", m.Name, down.Milliseconds())
		fmt.Fprintf(&conf, "sentinel failover-timeout %s %d\n", m.Name, max(4*down, 2*time.Second).Milliseconds())
	}
	file := filepath.Join(dir, "sentinel.conf") // Sentinel rewrites it: its own, writable
	if err := os.WriteFile(file, []byte(conf.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	s := &Sentinel{&Server{Addr: "127.0.0.1:" + strconv.Itoa(port), port: port, t: t, sentinel: file}}
	if err := s.launch(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	for _, m := range sets {
		s.await(10*time.Second, m.Name, m.Addr, true)
	}
	return s
}

func cmp(d, orElse time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return orElse
}

// Primary is where the Sentinel says the primary of set is.
func (s *Sentinel) Primary(set string) (string, error) {
	addr, err := s.Array("SENTINEL", "GET-MASTER-ADDR-BY-NAME", set)
	if err != nil || len(addr) != 2 {
		return "", fmt.Errorf("SENTINEL GET-MASTER-ADDR-BY-NAME %s: %q %v", set, addr, err)
	}
	return net.JoinHostPort(addr[0], addr[1]), nil
}

// AwaitPrimary waits until the Sentinel says the primary of set is at
// addr, not down, and the server there says it is a primary: a failover
// is over. Polls every 10ms; fails the test after timeout.
func (s *Sentinel) AwaitPrimary(timeout time.Duration, set, addr string) {
	s.t.Helper()
	s.await(timeout, set, addr, false)
}

// await is AwaitPrimary; withReplicas also waits until the Sentinel
// knows every replica the primary has, so that it can fail it over.
func (s *Sentinel) await(timeout time.Duration, set, addr string, withReplicas bool) {
	s.t.Helper()
	var state string
	deadline := time.Now().Add(timeout)
	for {
		if state = s.primaryState(set, withReplicas); state == addr+" ready" {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("redistest: Sentinel: %s is %s after %v, want %s ready", set, state, timeout, addr)
		}
		time.Sleep(10 * time.Millisecond) // polling: a Sentinel has no way to wait
	}
}

// primaryState is "ADDR ready" when the Sentinel knows the primary of set
// at ADDR (withReplicas: and every replica the primary has), else what it
// knows.
func (s *Sentinel) primaryState(set string, withReplicas bool) string {
	addr, err := s.Primary(set)
	if err != nil {
		return err.Error()
	}
	kv, err := s.Array("SENTINEL", "MASTER", set)
	if err != nil {
		return err.Error()
	}
	fields := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		fields[kv[i]] = kv[i+1]
	}
	info, err := (&Server{Addr: addr, t: s.t}).Info("replication")
	if err != nil {
		return addr + " " + err.Error()
	}
	replicas := InfoField(info, "connected_slaves")
	if fields["flags"] != "master" || (withReplicas && fields["num-slaves"] != replicas) || InfoField(info, "role") != "master" {
		return fmt.Sprintf("%s flags=%s num-slaves=%s (the primary counts %s)", addr, fields["flags"], fields["num-slaves"], replicas)
	}
	return addr + " ready"
}

// Array runs one command over a fresh connection and returns its reply,
// an array of strings (nested arrays flattened; a nil is "").
func (s *Server) Array(args ...string) ([]string, error) {
	conn, err := s.dial()
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		return nil, err
	}
	return readFlat(bufio.NewReader(conn))
}

// readFlat reads one RESP2 reply as a flat list of strings.
func readFlat(r *bufio.Reader) ([]string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return nil, fmt.Errorf("empty reply")
	}
	switch line[0] {
	case '-':
		return nil, fmt.Errorf("redis: %s", line[1:])
	case '*':
		n, _ := strconv.Atoi(line[1:])
		var out []string
		for range n {
			items, err := readFlat(r)
			if err != nil {
				return nil, err
			}
			out = append(out, items...)
		}
		return out, nil
	case '$':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return []string{""}, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		return []string{string(buf[:n])}, nil
	}
	return []string{line[1:]}, nil
}
