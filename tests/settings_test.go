package tests

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/agent"
	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// TestAnAgentWithOtherSettingsIsRefused: an agent whose lease (or drift
// factor) differs from what the masters record grants nothing: its LOCK is
// ERR SETTINGS naming the setting, its value and the cluster's; STATUS
// says which settings differ; the cluster's agent still grants.
func TestAnAgentWithOtherSettingsIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*agent.Config)
		differ string // a setting settings_differ names
		text   []string
	}{
		{"another lease", func(c *agent.Config) { c.Lock.Lease = 2 * time.Second }, "lease",
			[]string{"lease=2s", "here, the masters record lease=1s", "(on 3 of 3)"}},
		{"another drift factor", func(c *agent.Config) { c.Lock.DriftFactor = 0.05 }, "drift",
			[]string{"drift=0.05", "here, the masters record drift=0.01", "(on 3 of 3)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			servers := redistest.Start(t, 3)
			cluster := agenttest.Start(t, agenttest.Config(t, servers, time.Second))
			awaitRecorded(t, agenttest.Dial(t, cluster.Config.Socket.Path), 3)
			odd := agenttest.ConfigNoBootstrap(t, servers, time.Second)
			odd.AgentID = "odd"
			tc.change(&odd)
			c := agenttest.Dial(t, agenttest.StartNoWait(t, odd).Config.Socket.Path)
			c.AwaitMasters("settings", 3)
			r := c.Do("LOCK k")
			if r.Kind != "ERR" || r.Code != "SETTINGS" {
				t.Fatalf("LOCK on the odd agent: %s, want ERR SETTINGS", r.Line)
			}
			for _, want := range tc.text {
				if !strings.Contains(r.Line, want) {
					t.Errorf("LOCK answered %q, want %q in it", r.Line, want)
				}
			}
			for _, line := range []string{"LOCK k fair=true wait=5s", "LOCK a b wait=5s", "LOCK s limit=3 wait=5s", "WHO k"} {
				sent := time.Now()
				if r := c.Do(line); r.Code != "SETTINGS" || time.Since(sent) > 2*time.Second {
					t.Errorf("%s on the odd agent: %s after %v, want ERR SETTINGS at once", line, r.Line, time.Since(sent))
				}
			}
			st := c.Do("STATUS")
			if !strings.Contains(","+st.Fields["settings_differ"]+",", ","+tc.differ+",") {
				t.Errorf("STATUS: %s, want settings_differ naming %s", st.Line, tc.differ)
			}
			if st.Data[0]["reason"] != "records_other_settings" || !strings.Contains(st.Data[0]["settings"], "lease=1s;drift=0.01;") {
				t.Errorf("STATUS: %+v, want each master's recorded settings", st.Data[0])
			}
			if r := agenttest.Dial(t, cluster.Config.Socket.Path).Do("LOCK k"); r.Kind != "OK" {
				t.Fatalf("LOCK on the cluster's agent: %s", r.Line)
			}
		})
	}
}

// awaitRecorded waits until n masters record c's agent's settings (the
// masters agenttest bootstraps record none, and vote, until the agent
// knows a majority and records its own).
func awaitRecorded(t *testing.T, c *agenttest.Conn, n int) {
	t.Helper()
	var st agenttest.Reply
	lockagenttest.Eventually(t, 5*time.Second, func() bool {
		st = c.Do("STATUS")
		in := 0
		for _, d := range st.Data {
			if d["settings"] == st.Fields["settings"] {
				in++
			}
		}
		return in == n
	}, "never %d masters recorded the agent's settings: %+v", n, &st)
}

// grantLog polls an agent with LOCK NAME wait=0 until stopped, unlocking
// what it is granted, and records when each grant's reply came.
type grantLog struct {
	mu       sync.Mutex
	grants   []time.Time
	fences   []int64
	settings int // ERR SETTINGS answers
	stop     chan struct{}
	done     chan struct{}
}

func pollGrants(t *testing.T, socket, name string) *grantLog {
	g := &grantLog{stop: make(chan struct{}), done: make(chan struct{})}
	c := agenttest.Dial(t, socket)
	tick := time.NewTicker(10 * time.Millisecond)
	go func() {
		defer close(g.done)
		defer tick.Stop()
		for {
			select {
			case <-g.stop:
				return
			case <-tick.C:
			}
			r := c.Do("LOCK " + name + " wait=0")
			g.mu.Lock()
			switch {
			case r.Kind == "OK":
				g.grants, g.fences = append(g.grants, time.Now()), append(g.fences, r.Int("fence"))
			case r.Code == "SETTINGS":
				g.settings++
			}
			g.mu.Unlock()
			if r.Kind == "OK" {
				c.Do("UNLOCK " + name)
			}
		}
	}()
	return g
}

func (g *grantLog) finish() {
	close(g.stop)
	<-g.done
}

// TestAShortLeaseAgentIsNotGrantedWhileALongLeaseHolds is the overlap that
// settings differing between agents made possible: agent "long" (lease 3s)
// holds k, granted by m0 and m1 while m2 was paused; m2 resumes, m1
// restarts empty, and agent "short" (lease 300ms, so a quarantine of about
// 0.4s, not bootstrapped) starts and meets m1 as a master that lost its
// data. Short must not be granted k while long's holder holds it (until it
// hears LOST, or unlocks), and m1 must be back in long's service within one
// of long's quarantines.
func TestAShortLeaseAgentIsNotGrantedWhileALongLeaseHolds(t *testing.T) {
	servers := redistest.Start(t, 3)
	t.Cleanup(func() {
		for _, s := range servers {
			s.Resume()
		}
	})
	longCfg := agenttest.Config(t, servers, 3*time.Second)
	longCfg.AgentID, longCfg.Lock.MaxTTL = "long", 3*time.Second
	shortCfg := agenttest.ConfigNoBootstrap(t, servers, 300*time.Millisecond)
	shortCfg.AgentID, shortCfg.Lock.MaxTTL = "short", 300*time.Millisecond
	long := agenttest.Start(t, longCfg)
	holder := agenttest.Dial(t, long.Config.Socket.Path)
	servers[2].Pause()
	holder.AwaitMasters("down", 1)
	r := holder.Do("LOCK k")
	if r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	fence := r.Int("fence")
	servers[2].Resume()
	holder.AwaitMasters("up", 3)
	servers[1].Restart() // empty: it forgot long's hold
	restarted := time.Now()
	short := agenttest.StartNoWait(t, shortCfg)
	grants := pollGrants(t, short.Config.Socket.Path, "k")

	// Long's hold ends at its LOST (m2 never got the grant, if no renewal
	// re-created it there before m1 restarted), or when it unlocks.
	var end time.Time
	if p := holder.Push(2500 * time.Millisecond); p != "" {
		end = time.Now()
		if !strings.HasPrefix(p, "* LOST k ") {
			t.Fatalf("holder heard %q", p)
		}
		t.Logf("holder was told %q after %v", p, end.Sub(restarted))
	} else {
		end = time.Now()
		if r := holder.Do("UNLOCK k"); r.Kind != "OK" {
			t.Fatal(r.Line)
		}
	}
	// m1 votes for long again within one of long's quarantines (plus a
	// probe and a loaded host's slack): short did not take it out of
	// long's service.
	quarantine := agent.Quarantine(longCfg.Lock)
	holder.AwaitMastersWithin(quarantine+2*time.Second, "up", 3)
	if back := time.Since(restarted); back > quarantine+time.Second {
		t.Errorf("m1 was back in long's service %v after its restart, more than a quarantine (%v) and a second", back, quarantine)
	}
	grants.finish()
	overlaps, lowFences := 0, 0
	for i, at := range grants.grants {
		if at.Before(end) {
			if overlaps++; overlaps == 1 {
				t.Errorf("two holders: short was granted k %v before long's hold ended (%v after m1's restart)", end.Sub(at), at.Sub(restarted))
			}
		}
		if grants.fences[i] <= fence {
			lowFences++
		}
	}
	if overlaps > 0 || lowFences > 0 {
		t.Errorf("%d of short's %d grants came before long's hold ended; %d had a fence not above long's %d", overlaps, len(grants.grants), lowFences, fence)
	}
	if grants.settings == 0 {
		t.Errorf("short was never answered ERR SETTINGS")
	}
	t.Logf("short: %d grants, %d ERR SETTINGS", len(grants.grants), grants.settings)
}
