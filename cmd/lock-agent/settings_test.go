package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/agent"
	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// settingsConfig writes a config file over servers with lease (and max_ttl)
// lease, and returns its path.
func settingsConfig(t *testing.T, servers []*redistest.Server, lease string) string {
	t.Helper()
	dir := t.TempDir()
	var b strings.Builder
	fmt.Fprintf(&b, "agent { id = \"new\" }\nsocket { path = %q }\n", filepath.Join(dir, "agent.sock"))
	for i, s := range servers {
		fmt.Fprintf(&b, "redis \"m%d\" { address = %q }\n", i, s.Addr)
	}
	fmt.Fprintf(&b, "lock {\n  lease = %q\n  max_ttl = %q\n}\n", lease, lease)
	path := filepath.Join(dir, "agent.hcl")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestSettingsCommandChangesTheLease is the documented procedure: with an
// agent (lease 1s) holding k, `lock-agent settings -config NEW -apply`
// records lease 2s in every master. The old agent's hold is lost within
// about one old lease and it grants nothing more (ERR SETTINGS); an agent
// started with the new config is granted k only once the change's
// quarantine (the new one: the longer) has ended, with a greater fence.
func TestSettingsCommandChangesTheLease(t *testing.T) {
	servers := redistest.Start(t, 3)
	oldCfg := agenttest.Config(t, servers, time.Second)
	oldCfg.Lock.MaxTTL = time.Second
	old := agenttest.Start(t, oldCfg)
	holder := agenttest.Dial(t, old.Config.Socket.Path)
	// The masters agenttest bootstraps record no settings until the agent
	// knows a majority and records its own.
	lockagenttest.Eventually(t, 5*time.Second, func() bool {
		st := holder.Do("STATUS")
		for _, d := range st.Data {
			if d["settings"] != st.Fields["settings"] {
				return false
			}
		}
		return true
	}, "the old agent never recorded its settings")
	r := holder.Do("LOCK k")
	if r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	path := settingsConfig(t, servers, "2s")
	var stdout, stderr bytes.Buffer
	if code := realMain([]string{"settings", "-config", path}, &stdout, &stderr); code != exitOK ||
		!strings.Contains(stdout.String(), "m0: differs: lease=2s") || !strings.Contains(stdout.String(), "it records lease=1s") {
		t.Fatalf("settings (show): exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	changed := time.Now()
	stdout.Reset()
	if code := realMain([]string{"settings", "-config", path, "-apply"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("settings -apply: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	t.Logf("settings -apply printed:\n%s", stdout.String())
	if p := holder.Push(3 * time.Second); !strings.HasPrefix(p, "* LOST k ") {
		t.Fatalf("the old agent's holder heard %q, want LOST", p)
	} else if lost := time.Since(changed); lost > 2*time.Second {
		t.Errorf("the old hold was lost %v after the change, more than an old lease and a renewal", lost)
	}
	holder.AwaitMasters("settings", 3)
	if r := holder.Do("LOCK j"); r.Code != "SETTINGS" {
		t.Fatalf("the old agent answered %s, want ERR SETTINGS", r.Line)
	}
	stdout.Reset()
	if code := realMain([]string{"settings", "-config", path, "-apply"}, &stdout, &stderr); code != exitOK || !strings.Contains(stdout.String(), "nothing to change") {
		t.Fatalf("settings -apply again: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	newCfg, _, err := loadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	quarantine := agent.Quarantine(newCfg.Lock)
	c := agenttest.Dial(t, agenttest.StartNoWait(t, newCfg).Config.Socket.Path)
	var granted time.Time
	seen := 0 // STATUS lines of a master in the change's quarantine
	lockagenttest.Eventually(t, quarantine+5*time.Second, func() bool {
		// A master the change quarantined kept its data: never "lost".
		for _, d := range c.Do("STATUS").Data {
			if d["state"] == "quarantined" {
				if seen++; d["data"] != "changed" {
					t.Errorf("a master the settings command quarantined shows data=%s, want changed: %v", d["data"], d)
				}
			}
		}
		r = c.Do("LOCK k wait=0")
		granted = time.Now()
		return r.Kind == "OK"
	}, "the new agent was never granted k")
	t.Logf("%d STATUS lines showed a master in the change's quarantine", seen)
	if waited := granted.Sub(changed); waited < quarantine {
		t.Errorf("the new agent was granted k %v after the change, before its quarantine (%v) ended", waited, quarantine)
	}
	if st := c.Do("STATUS"); st.Fields["settings_differ"] != "" {
		t.Errorf("the new agent's STATUS: %s", st.Line)
	}
	t.Logf("granted %v after the change (quarantine %v)", granted.Sub(changed), quarantine)
}
