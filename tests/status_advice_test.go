package tests

import (
	"strings"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/agenttest"
)

// TestBinaryAdviceForAMasterThatLostItsData: an established master
// restarted empty is said to have lost its data, and to be waited out, by
// `lock-agent status` and the log; neither suggests bootstrapping it (they
// used to: "(a new deployment: lock-agent bootstrap)").
func TestBinaryAdviceForAMasterThatLostItsData(t *testing.T) {
	t.Parallel() // its own masters and agents; judges no latency
	_, logs, _, sock, servers := binaryAgent(t, "")
	c := agenttest.Dial(t, sock)
	c.AwaitMasters("up", 3)
	if r := c.Do("LOCK served"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	servers[0].Restart()
	var out string
	lockagenttest.Eventually(t, 10*time.Second, func() bool {
		_, out, _ = lockAgent(t, "status", "-socket", sock)
		return strings.Contains(out, "quarantined")
	}, "status never showed the restarted master quarantined:\n%s", &out)
	waitForLog(t, logs, "data=lost")
	for what, text := range map[string]string{"status": out, "the log": logs.String()} {
		if !strings.Contains(text, "it lost its data (restarted empty, flushed or restored)") {
			t.Errorf("%s does not say the master lost its data:\n%s", what, text)
		}
		if strings.Contains(strings.ReplaceAll(text, "never lock-agent bootstrap", ""), "bootstrap") {
			t.Errorf("%s suggests bootstrap for a master that lost its data:\n%s", what, text)
		}
	}
}
