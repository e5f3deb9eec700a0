//go:build lockagent_testhooks

package telemetry

import (
	"os"
	"strings"
	"time"
)

// Built only into test binaries (go build -tags lockagent_testhooks): with
// LOCK_AGENT_TEST_WEDGE_FILE set, a loop whose name (see Loop.String) is
// the content of that file stops at its next beat until the file changes,
// so end-to-end tests can wedge the real binary's loops on cue.
func init() {
	path := os.Getenv("LOCK_AGENT_TEST_WEDGE_FILE")
	if path == "" {
		return
	}
	wedge := func(loop string) {
		for {
			b, err := os.ReadFile(path)
			if err != nil || strings.TrimSpace(string(b)) != loop {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	wedgeHook.Store(&wedge)
}
