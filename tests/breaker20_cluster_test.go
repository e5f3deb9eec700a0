package tests

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/agent"
	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
	"github.com/lock-agent/lock-agent/quorum"
)

// Issue 20, item 1, attacked: masters that are Redis Clusters met as a
// hostile user and a failing cluster would meet them. Each test says what
// it tried and what must hold.

// statusLine is the DATA line of master name in a raw STATUS reply.
func statusLine(status, name string) string {
	for _, line := range strings.Split(status, "\n") {
		if strings.Contains(line, " master="+name+" ") {
			return line
		}
	}
	return ""
}

// TestBreaker20ClusterSeedsWrong: of five masters, one is a cluster block
// whose seed is a standalone redis-server and one whose seed listens on no
// port. The agent must start, grant with the three others, never vote on
// the wrong ones (no key of ours lands on the standalone), and STATUS must
// say why each does not vote.
func TestBreaker20ClusterSeedsWrong(t *testing.T) {
	servers := redistest.Start(t, 4)
	cfg := agenttest.Config(t, servers[:3], time.Second)
	gone := redistest.Reserve(t, 1)[0] // a free port, nothing listening
	cfg.Masters = append(cfg.Masters,
		quorum.MasterConfig{Name: "standalone", Cluster: []string{servers[3].Addr}},
		quorum.MasterConfig{Name: "nowhere", Cluster: []string{gone.Addr}})
	a := agenttest.StartNoWait(t, cfg)
	c := agenttest.Dial(t, a.Config.Socket.Path)
	c.AwaitMastersWithin(10*time.Second, "up", 3)
	for i := range 20 { // names over many slots
		name := fmt.Sprintf("seed%d", i)
		if r := c.Do("LOCK " + name + " wait=2s"); r.Kind != "OK" {
			t.Fatalf("LOCK %s with three of five masters up: %s", name, r.Line)
		}
		if r := c.Do("UNLOCK " + name); r.Kind != "OK" {
			t.Fatalf("UNLOCK %s: %s", name, r.Line)
		}
	}
	status := rawStatus(t, a)
	for _, name := range []string{"standalone", "nowhere"} {
		line := statusLine(status, name)
		if line == "" || strings.Contains(line, "state=up") || !strings.Contains(line, "error=") && !strings.Contains(line, "reason=") {
			t.Errorf("master %s: STATUS line %q: want it not up, and why", name, line)
		}
		t.Logf("%s", line)
	}
	// A release goes to every master, down or not (it may have missed a
	// grant's reply): its tombstone is no vote. Anything else would be.
	keys, err := servers[3].Array("KEYS", "*")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if !strings.Contains(k, ":released:") {
			t.Errorf("the standalone server named as a cluster seed holds %q: the agent ran a vote on it", k)
		}
	}
}

// agentOverClusters starts n clusters of opts and the configuration of an
// agent whose masters they are, not bootstrapped: it meets them as new.
func agentOverClusters(t *testing.T, n int, opts redistest.ClusterOptions, lease time.Duration) (agent.Config, []*redistest.Cluster) {
	var clusters []*redistest.Cluster
	cfg := agenttest.ConfigNoBootstrap(t, nil, lease)
	for i := range n {
		cl := redistest.StartCluster(t, opts)
		clusters = append(clusters, cl)
		cfg.Masters = append(cfg.Masters, quorum.MasterConfig{Name: fmt.Sprintf("m%d", i), Cluster: cl.Seeds()})
	}
	return cfg, clusters
}

// namesPerShard is one name (prefix + a number) in the slots of each of
// cl's shards, in the shards' order.
func namesPerShard(cl *redistest.Cluster, prefix string) []string {
	shards := cl.Shards()
	names := make([]string, len(shards))
	for i, left := 0, len(shards); left > 0; i++ {
		name := fmt.Sprintf("%s%d", prefix, i)
		k := slices.Index(shards, cl.Owner(redistest.SlotOf(name)))
		if names[k] == "" {
			names[k] = name
			left--
		}
	}
	return names
}

// TestBreaker20ClusterFreshNoBootstrap: an agent meets three fresh
// clusters it was not told are new (no bootstrap). Every slot must sit out
// a whole quarantine before it votes — no name in any shard is granted
// sooner than the quarantine after the agent started — and then vote:
// STATUS shows no quarantined slot, and a name in each shard is granted.
func TestBreaker20ClusterFreshNoBootstrap(t *testing.T) {
	t0 := time.Now()
	cfg, clusters := agentOverClusters(t, 3, redistest.ClusterOptions{Shards: 3}, time.Second)
	t.Logf("three clusters started in %v", time.Since(t0).Round(time.Millisecond))
	quarantine := agent.Quarantine(cfg.Lock)
	started := time.Now()
	a := agenttest.StartNoWait(t, cfg)
	c := agenttest.Dial(t, a.Config.Socket.Path)
	names := namesPerShard(clusters[0], "fresh")
	granted := map[string]time.Time{}
	pollFor(20*time.Second, 20*time.Millisecond, func() bool {
		for _, name := range names {
			if _, ok := granted[name]; ok {
				continue
			}
			if r := c.Do("LOCK " + name + " wait=0"); r.Kind == "OK" {
				granted[name] = time.Now()
				c.Do("UNLOCK " + name)
			}
		}
		return len(granted) == len(names)
	})
	for _, name := range names {
		at, ok := granted[name]
		switch {
		case !ok:
			t.Errorf("%s (slot %d) never granted in 20s: %s", name, redistest.SlotOf(name), rawStatus(t, a))
		case at.Sub(started) < quarantine:
			t.Errorf("%s granted %v after the agent met fresh masters, before their quarantine (%v) ended", name, at.Sub(started), quarantine)
		}
	}
	if !voting(t, a) {
		t.Error("slots still quarantined")
	}
	for _, name := range names {
		t.Logf("%s (slot %d) granted %v after the agent started; quarantine %v", name, redistest.SlotOf(name), granted[name].Sub(started).Round(time.Millisecond), quarantine)
	}
}
