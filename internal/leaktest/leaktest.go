// Package leaktest fails a test binary that leaves goroutines of this
// project running after its tests: every long-lived component must stop
// when its context ends.
package leaktest

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Main runs the tests, then waits up to 5s for every goroutine running this
// project's code to end. Use it as TestMain: func TestMain(m *testing.M) { leaktest.Main(m) }.
func Main(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaked := wait(5 * time.Second); leaked != "" {
			fmt.Fprintf(os.Stderr, "leaktest: goroutines still running after the tests:\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

func wait(limit time.Duration) string {
	deadline := time.Now().Add(limit)
	for {
		leaked := ours()
		if leaked == "" || time.Now().After(deadline) {
			return leaked
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ours returns the stacks of goroutines that run code of this module,
// other than the test runner's own.
func ours() string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if !strings.Contains(g, "github.com/lock-agent/lock-agent/") ||
			strings.Contains(g, "leaktest.ours") || strings.Contains(g, "testing.(*M).Run") ||
			strings.Contains(g, "testing.tRunner") {
			continue
		}
		out = append(out, g)
	}
	return strings.Join(out, "\n\n")
}
