package agent_test

import (
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// awaitData waits until STATUS shows master (every master, if "") as
// quarantined with data=want, and returns its DATA lines.
func awaitData(t *testing.T, c *agenttest.Conn, master, want string) []map[string]string {
	t.Helper()
	var masters []map[string]string
	lockagenttest.Eventually(t, 10*time.Second, func() bool {
		masters = c.Do("STATUS").Data
		n := 0
		for _, d := range masters {
			if (master == "" || d["master"] == master) && d["state"] == "quarantined" && d["data"] == want {
				n++
			}
		}
		return n == len(masters) || master != "" && n == 1
	}, "STATUS never showed %q quarantined with data=%s: %+v", master, want, &masters)
	return masters
}

// TestStatusTellsANewDeploymentFromAMasterThatLostItsData: masters that
// never had a marker are a new deployment (data=new: the only state in
// which bootstrap is advised); once the deployment served, a master
// restarted empty lost its data (data=lost: never bootstrap it), for this
// agent, which saw its epoch change, and for an agent started after the
// restart, which sees the other masters vote. The metrics say the same.
func TestStatusTellsANewDeploymentFromAMasterThatLostItsData(t *testing.T) {
	servers := redistest.Start(t, 3)
	cfg := agenttest.ConfigNoBootstrap(t, servers, 5*time.Second) // a quarantine of ~5s: time for a second agent to start
	cfg.AgentID = "host-a"
	a := agenttest.StartNoWait(t, cfg)
	c := agenttest.Dial(t, a.SocketPath())
	awaitData(t, c, "", "new")
	awaitMetric(t, a, 1, "lock_agent_master_quarantine_data", "master", "m1", "data", "new")

	c.AwaitMastersWithin(10*time.Second, "up", 3)
	if r := c.Do("LOCK served"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	servers[0].Restart()
	awaitData(t, c, "m0", "lost")
	s := awaitMetric(t, a, 1, "lock_agent_master_quarantine_data", "master", "m0", "data", "lost")
	s.expect(t, 0, "lock_agent_master_quarantine_data", "master", "m0", "data", "new")

	late := cfg
	late.AgentID = "host-b"
	late.Socket.Path = cfg.Socket.Path + ".b"
	b := agenttest.StartNoWait(t, late)
	awaitData(t, agenttest.Dial(t, b.SocketPath()), "m0", "lost")
}
