package tests

import (
	"bufio"
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/redistest"
)

// echoEnv names the socket on which the test binary, started with it, is an
// echo server (see TestMain): the least any daemon that answers a line
// over a Unix socket from another process costs on this machine.
const echoEnv = "LOCK_AGENT_ECHO_SOCKET"

// echo answers every line of every connection on path with the tag "1 OK",
// until killed.
func echo(path string) {
	l, err := net.Listen("unix", path)
	if err != nil {
		os.Exit(1)
	}
	for {
		conn, err := l.Accept()
		if err != nil {
			os.Exit(1)
		}
		go func() {
			defer conn.Close()
			r := bufio.NewReader(conn)
			for {
				line, err := r.ReadSlice('\n')
				if err != nil {
					return
				}
				tag, _, _ := bytes.Cut(line, []byte{' '})
				if _, err := conn.Write(append(append([]byte{}, tag...), " OK\n"...)); err != nil {
					return
				}
			}
		}()
	}
}

// startEcho runs the test binary as an echo server in a process of its own
// and returns its socket.
func startEcho(b *testing.B) string {
	path := filepath.Join(b.TempDir(), "echo.sock")
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), echoEnv+"="+path)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitForListener(b, path)
	return path
}

// BenchmarkRoundTrip is what a request answered over the agent's socket
// costs from another process, beside the least any such daemon costs on
// this machine: a Go echo server in a process of its own (echo), the
// agent's PING (agent-ping), and a LOCK+UNLOCK of a name the agent keeps
// cached (agent-cached-cycle: two round trips, answered with no master).
// The serial one-name target of issue 19 (0.35x the floor's cycle) asks
// for a cached cycle of two round trips: this shows what two round trips
// cost here, whatever the daemon does between them.
//
//	go test ./tests -run '^$' -bench '^BenchmarkRoundTrip$' -benchtime 1x
func BenchmarkRoundTrip(b *testing.B) {
	servers := redistest.Start(b, 3)
	agents := startProcAgents(b, releaseBinary(b), servers, compareLock, "rt")
	echoSock := startEcho(b)
	const rounds = 5000
	measure := func(b *testing.B, sock string, requests ...string) {
		c := dialLine(b, sock)
		samples := make([]time.Duration, 0, rounds)
		for range b.N {
			for range rounds {
				start := time.Now()
				for _, r := range requests {
					if _, err := c.do(r, 5*time.Second); err != nil {
						b.Fatal(err)
					}
				}
				samples = append(samples, time.Since(start))
			}
		}
		b.StopTimer()
		report(b, "", samples)
		b.ReportMetric(0, "ns/op")
	}
	b.Run("echo", func(b *testing.B) { measure(b, echoSock, "PING") })
	b.Run("agent-ping", func(b *testing.B) { measure(b, agents[0].sock, "PING") })
	b.Run("agent-cached-cycle", func(b *testing.B) { measure(b, agents[0].sock, "LOCK rt", "UNLOCK rt") })
	b.Run("echo-two", func(b *testing.B) { measure(b, echoSock, "PING", "PING") })
}
