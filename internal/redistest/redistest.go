// Package redistest starts real redis-server processes on random loopback
// ports for tests, and stops them when the test ends. It never mocks Redis.
package redistest

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Server is one running redis-server.
type Server struct {
	Addr string
	port int
	cmd  *exec.Cmd
	t    testing.TB
	tls  *TLSFiles // nil for plain TCP
	dir  string    // its working directory
	// args are more arguments it starts with (see StartWith), and
	// sentinel the config file it runs as a Sentinel with ("" if not).
	args     []string
	sentinel string
}

// TLSFiles are the PEM files a TLS server is started with: it serves only
// TLS, and requires client certificates signed by the CA.
type TLSFiles struct {
	Cert, Key, CA string
	Client        *tls.Config // how the harness itself connects
}

// StartTLS is Start for servers that speak only TLS.
func StartTLS(t testing.TB, n int, files *TLSFiles) []*Server {
	t.Helper()
	Start(t, 0)
	out := make([]*Server, n)
	for i := range out {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		out[i] = &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), port: port, t: t, tls: files}
		if err := out[i].launch(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(out[i].Stop)
	}
	return out
}

// Start starts n redis-servers with no persistence and registers their stop.
// It skips the test when redis-server is not installed and the test is not
// running in CI (where a missing server is a failure).
func Start(t testing.TB, n int) []*Server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("redis-server is not installed")
		}
		t.Skip("redis-server is not installed")
	}
	out := make([]*Server, n)
	for i := range out {
		out[i] = start(t)
	}
	return out
}

// Reserve picks n free ports and returns servers that are not running yet:
// addresses where nothing answers until Launch.
func Reserve(t testing.TB, n int) []*Server {
	t.Helper()
	Start(t, 0) // the same skip-or-fail when redis-server is missing
	out := make([]*Server, n)
	for i := range out {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		out[i] = &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), port: port, t: t}
		t.Cleanup(out[i].Stop)
	}
	return out
}

// Launch starts a reserved (or stopped) server on its port.
func (s *Server) Launch() {
	s.t.Helper()
	if err := s.launch(); err != nil {
		s.t.Fatalf("redistest: %v", err)
	}
}

func start(t testing.TB, args ...string) *Server {
	t.Helper()
	var lastErr error
	for range 10 {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), port: port, t: t, args: args}
		if lastErr = s.launch(); lastErr == nil {
			t.Cleanup(s.Stop)
			return s
		}
	}
	t.Fatalf("redistest: could not start redis-server: %v", lastErr)
	return nil
}

func (s *Server) launch() error {
	if s.dir == "" {
		// Its own directory: a dump.rdb left in the working directory (a
		// test that saved) would otherwise be loaded at every start.
		dir, err := os.MkdirTemp("", "redistest")
		if err != nil {
			return err
		}
		s.dir = dir
		s.t.Cleanup(func() {
			s.kill() // a Reserved server's Stop runs after this
			s.logIfFailed()
			os.RemoveAll(dir)
		})
	}
	args := []string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--dir", s.dir,
		"--save", "", "--appendonly", "no", "--protected-mode", "no", "--loglevel", "warning",
		"--logfile", filepath.Join(s.dir, logFile)}
	if s.sentinel != "" {
		args = append([]string{s.sentinel, "--sentinel"}, args...)
	}
	args = append(args, s.args...)
	if s.tls != nil {
		args[1] = "0"
		args = append(args, "--tls-port", strconv.Itoa(s.port), "--tls-cert-file", s.tls.Cert,
			"--tls-key-file", s.tls.Key, "--tls-ca-cert-file", s.tls.CA, "--tls-auth-clients", "yes")
	}
	s.cmd = exec.Command("redis-server", args...)
	if err := s.cmd.Start(); err != nil {
		return err
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if s.Ping() == nil {
			return s.answeredByItself()
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.cmd.Process.Kill()
	s.cmd.Wait()
	return fmt.Errorf("redis-server on port %d did not answer", s.port)
}

// answeredByItself checks that the server answering on the port is the
// one just started: between freePort and the bind, another test's server
// may take the port (a test then met that server's data: a marker with
// other settings). If it is another, the one started is stopped and the
// error says so, so that start tries another port.
func (s *Server) answeredByItself() error {
	info, err := s.Info("server")
	if err != nil {
		return nil // a server that cannot say (TLS, auth): as before
	}
	_, rest, ok := strings.Cut(info, "process_id:")
	if !ok {
		return nil
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(rest, "\n", 2)[0]))
	if err != nil || pid == s.cmd.Process.Pid {
		return nil
	}
	s.cmd.Process.Kill()
	s.cmd.Wait()
	return fmt.Errorf("port %d is another redis-server's (pid %d)", s.port, pid)
}

// logFile is the name of a server's log in its directory: every start of
// it appends there.
const logFile = "redis.log"

// logIfFailed writes the end of the server's log to the test's, if the
// test failed: a master that stopped answering (refused connections) in a
// soak left nothing to tell why.
func (s *Server) logIfFailed() {
	if !s.t.Failed() || slices.Contains(s.args, "--logfile") {
		return // a Cluster's node logs elsewhere, and its Cluster shows it
	}
	b, err := os.ReadFile(filepath.Join(s.dir, logFile))
	if err != nil || len(b) == 0 {
		return
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if !slices.ContainsFunc(banner, func(b string) bool { return strings.Contains(l, b) }) {
			lines = append(lines, l)
		}
	}
	lines = lines[max(0, len(lines)-20):]
	s.t.Logf("redistest: the end of %s's log (each start but its banner):\n%s", s.Addr, strings.Join(lines, "\n"))
}

// banner is what every start of a server logs after "Redis is starting":
// left out of a failed test's log.
var banner = []string{"Redis version=", "Configuration loaded", "Server initialized", "WARNING Memory overcommit"}

// Ping sends PING over a fresh connection.
func (s *Server) Ping() error {
	_, err := s.Do("PING")
	return err
}

// Do runs one command over a fresh connection and returns the first reply
// line (without its type byte); an error reply is an error.
func (s *Server) Do(args ...string) (string, error) {
	conn, err := s.dial()
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	return do(conn, args...)
}

func do(conn net.Conn, args ...string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		return "", err
	}
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	switch {
	case line == "":
		return "", fmt.Errorf("empty reply")
	case line[0] == '-':
		return "", fmt.Errorf("redis: %s", line[1:])
	case line[0] == '$':
		if line == "$-1" {
			return "", nil
		}
		v, err := r.ReadString('\n')
		return strings.TrimRight(v, "\r\n"), err
	}
	return line[1:], nil
}

// Info returns the text of INFO section.
func (s *Server) Info(section string) (string, error) {
	conn, err := net.DialTimeout("tcp", s.Addr, dialTimeout)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	fmt.Fprintf(conn, "*2\r\n$4\r\nINFO\r\n$%d\r\n%s\r\n", len(section), section)
	r := bufio.NewReader(conn)
	head, err := r.ReadString('\n')
	if err != nil || len(head) < 2 || head[0] != '$' {
		return "", fmt.Errorf("INFO: %q %v", head, err)
	}
	n, _ := strconv.Atoi(strings.TrimSpace(head[1:]))
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		return "", err
	}
	return string(buf), nil
}

// Keys returns the number of keys matching pattern (by KEYS; tests only).
func (s *Server) Keys(pattern string) int {
	conn, err := net.DialTimeout("tcp", s.Addr, dialTimeout)
	if err != nil {
		s.t.Fatalf("redistest: %v", err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	fmt.Fprintf(conn, "*2\r\n$4\r\nKEYS\r\n$%d\r\n%s\r\n", len(pattern), pattern)
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || len(line) < 2 || line[0] != '*' {
		s.t.Fatalf("redistest: KEYS: %q %v", line, err)
	}
	n, _ := strconv.Atoi(strings.TrimSpace(line[1:]))
	return n
}

// Pause stops the server with SIGSTOP: its socket stays open but nothing answers.
func (s *Server) Pause() { s.cmd.Process.Signal(syscall.SIGSTOP) }

// Resume continues a paused server.
func (s *Server) Resume() { s.cmd.Process.Signal(syscall.SIGCONT) }

// Nice sets the niceness of the server's main thread, which runs its
// commands (setpriority(2)): 19 gives it the least CPU beside other
// work, as a master starved on a busy host. It holds until the server
// stops (a Restart starts it at 0).
func (s *Server) Nice(n int) {
	s.t.Helper()
	if err := syscall.Setpriority(syscall.PRIO_PROCESS, s.cmd.Process.Pid, n); err != nil {
		s.t.Fatalf("redistest: nice %d: %v", n, err)
	}
}

// PauseFor is a fault that lasts d: the servers at the indexes which are
// paused together, and resumed together once d has passed. The sleep is
// the fault's length, not a wait for an event.
func PauseFor(d time.Duration, servers []*Server, which ...int) {
	for _, i := range which {
		servers[i].Pause()
	}
	time.Sleep(d)
	for _, i := range which {
		servers[i].Resume()
	}
}

// Restart kills the server and starts a new, empty one on the same port: a
// master that lost its data.
func (s *Server) Restart() {
	s.t.Helper()
	s.kill()
	var err error
	for range 20 {
		if err = s.launch(); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.t.Fatalf("redistest: restart: %v", err)
}

// Stop kills the server. Calling it twice is safe.
func (s *Server) Stop() { s.kill() }

func (s *Server) kill() {
	if s.cmd == nil || s.cmd.Process == nil || s.cmd.ProcessState != nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGCONT)
	s.cmd.Process.Kill()
	s.cmd.Wait()
}

func (s *Server) dial() (net.Conn, error) {
	if s.tls != nil {
		return tls.DialWithDialer(&net.Dialer{Timeout: dialTimeout}, "tcp", s.Addr, s.tls.Client)
	}
	return net.DialTimeout("tcp", s.Addr, dialTimeout)
}

// dialTimeout bounds the harness's own connections to a server. It judges
// nothing: a loaded host stalled a test process for over a second (the
// dial timed out before the kernel's accept was read), and a harness dial
// that gives up then fails a test for the host's speed. (A paused server
// still accepts: its kernel does.)
const dialTimeout = 5 * time.Second

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
