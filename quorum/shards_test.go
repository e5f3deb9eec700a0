package quorum

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

func TestSlotOfMatchesRedis(t *testing.T) {
	for _, key := range []string{"", "a", "foo", "t:{a}:h:h1", "t:{a}", "{}x", "x{}y{z}", "{user1000}.following", "123456789"} {
		if got, want := slotOf(key), redistest.SlotOf(key); got != want {
			t.Errorf("slotOf(%q) = %d, redis says %d", key, got, want)
		}
	}
	tags := slotTags()
	for slot, tag := range tags {
		if slotOf("t:epoch{"+tag+"}") != slot {
			t.Fatalf("slot %d: tag %q is in slot %d", slot, tag, slotOf(tag))
		}
	}
}

func TestSlotRanges(t *testing.T) {
	for _, tc := range []struct {
		slots []int
		want  string
	}{{nil, ""}, {[]int{0}, "0"}, {[]int{0, 1, 2, 5, 7, 8}, "0-2,5,7-8"}} {
		if got := slotRanges(tc.slots); got != tc.want {
			t.Errorf("slotRanges(%v) = %q, want %q", tc.slots, got, tc.want)
		}
	}
}

// clusterConfig is a configuration of one master per cluster, bootstrapped
// when fresh.
func clusterConfig(t testing.TB, clusters []*redistest.Cluster, quarantine time.Duration, fresh bool) Config {
	t.Helper()
	// Every call on a cluster master reads the server's run_id, and goes
	// through a cluster client: under -race on a loaded host 100ms (the
	// standalone tests') is too short a round.
	cfg := Config{KeyPrefix: "t:", DriftFactor: 0.01, MasterTimeout: 300 * time.Millisecond, ProbeInterval: 20 * time.Millisecond,
		Quarantine: quarantine, Tombstone: 5 * time.Second}
	for i, cl := range clusters {
		cfg.Masters = append(cfg.Masters, MasterConfig{Name: fmt.Sprintf("c%d", i), Cluster: cl.Seeds()})
	}
	if fresh {
		planted, err := Bootstrap(context.Background(), cfg.KeyPrefix, cfg.Masters)
		if err != nil || len(planted) != len(clusters) {
			t.Fatalf("bootstrap: planted %v, %v", planted, err)
		}
	}
	return cfg
}

// awaitGone waits until no cluster has key, on the shard that serves it.
func awaitGone(t *testing.T, clusters []*redistest.Cluster, key string) {
	t.Helper()
	n := 0
	lockagenttest.Eventually(t, 5*time.Second, func() bool {
		n = 0
		for _, cl := range clusters {
			n += cl.Owner(slotOf(key)).Primary.Keys(key)
		}
		return n == 0
	}, "%d clusters still have %s", &n, key)
}

func startClusters(t testing.TB, n, shards int) []*redistest.Cluster {
	out := make([]*redistest.Cluster, n)
	for i := range out {
		out[i] = redistest.StartCluster(t, redistest.ClusterOptions{Shards: shards})
	}
	return out
}

func TestClusterMastersGrantReleaseAndFence(t *testing.T) {
	clusters := startClusters(t, 3, 3)
	c := startCluster(t, clusterConfig(t, clusters, time.Second, true))
	ctx := context.Background()
	var last int64
	for i := range 20 { // names over many slots
		name := fmt.Sprintf("n%d", i)
		g, h1, err := acquireWithRetries(ctx, c, func(try int) AcquireRequest { return req(name, fmt.Sprintf("h1-%d", try)) })
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, refusal, _ := c.Acquire(ctx, req(name, "h2")); refusal == nil {
			t.Fatalf("%s granted twice", name)
		}
		// Release returns once a majority answered, which may be masters
		// that a try of the acquire before h1's reached late (see
		// TestAcquireReleaseAndBusy): held says little on a loaded host.
		if _, err := c.Release(ctx, name, h1); err != nil {
			t.Fatalf("%s release: %v", name, err)
		}
		awaitGone(t, clusters, c.holderKey(name, h1)) // the release lands on the last master just after
		g2, _, err := acquireWithRetries(ctx, c, func(try int) AcquireRequest { return req(name, fmt.Sprintf("h3-%d", try)) })
		if err != nil || g2.Fence <= g.Fence {
			t.Fatalf("%s: fence %d after %d: %v", name, g2.Fence, g.Fence, err)
		}
		last = g2.Fence
	}
	if last == 0 {
		t.Fatal("no fence")
	}
	for _, st := range c.Status() {
		if len(st.Shards) != 3 {
			t.Fatalf("status %+v: want 3 shards", st)
		}
	}
}
