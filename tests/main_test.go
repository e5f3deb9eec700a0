// Package tests holds lock-agent's integration, fault and end-to-end tests:
// real agents (in process, and the real binary) over real redis-servers.
package tests

import (
	"bufio"
	"flag"
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
//
// The tests that call t.Parallel() start their own redis-servers and
// agents, share nothing else, and assert no latency: safety and history
// runs through restarts, quarantines and faults, which spend their time
// waiting out leases. Go runs them after every other test of the package,
// so the tests that measure time run alone; four at a time (unless
// -parallel says otherwise) keep a CPU busy where GOMAXPROCS (two) would
// leave it idle. (scripts/test runs the longest of them beside the
// timing tests, in a process of their own: see there.)
func TestMain(m *testing.M) {
	if path := os.Getenv("LOCK_AGENT_HELPER_SOCKET"); path != "" {
		helper(path, os.Getenv("LOCK_AGENT_HELPER_NAME"))
		return
	}
	if path := os.Getenv(echoEnv); path != "" {
		echo(path) // BenchmarkRoundTrip's echo server
		return
	}
	if path := os.Getenv(relayEnv); path != "" {
		relay(path) // a candidate of the election tests
		return
	}
	if os.Getenv(procChildEnv) != "" {
		procChild() // TestProcReadersFollowTheProcess's process
		return
	}
	flag.Parse()
	if !flagGiven("test.parallel") {
		flag.Set("test.parallel", "4")
	}
	leaktest.Main(m)
}

// flagGiven says whether the flag name was set on the command line.
func flagGiven(name string) bool {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
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
