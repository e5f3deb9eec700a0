// Package tests holds lock-agent's integration, fault and end-to-end tests:
// real agents (in process, and the real binary) over real redis-servers.
package tests

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/leaktest"
)

// TestMain doubles as a helper client process: with LOCK_AGENT_HELPER_SOCKET
// set, the test binary locks LOCK_AGENT_HELPER_NAME, prints "locked", and
// keeps its session until killed. Tests kill it with SIGKILL to play a crashed client.
func TestMain(m *testing.M) {
	if path := os.Getenv("LOCK_AGENT_HELPER_SOCKET"); path != "" {
		helper(path, os.Getenv("LOCK_AGENT_HELPER_NAME"))
		return
	}
	if path := os.Getenv(relayEnv); path != "" {
		relay(path) // a candidate of the election tests
		return
	}
	leaktest.Main(m)
}

// soak is how long (or how many rounds) a test runs its workload of
// clients and faults: short by default, the CI-sized run that checks the
// same property, and long with LOCK_AGENT_SOAK=1 (see README.md,
// "Testing"), to look harder for a rare interleaving.
func soak[T time.Duration | int](short, long T) T {
	if os.Getenv("LOCK_AGENT_SOAK") != "" {
		return long
	}
	return short
}

func helper(path, name string) {
	c, err := net.Dial("unix", path)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Fprintf(c, "1 LOCK %s wait=10s\n", name)
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Print("locked ", line)
	io.Copy(io.Discard, c) // holds the session until killed (or until the agent ends it)
}
