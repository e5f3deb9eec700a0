package quorum

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// shardWatchAgents starts three clusters of two shards and two agents'
// Clusters over them: one watches, the other takes and releases.
func shardWatchAgents(t *testing.T) (clusters []*redistest.Cluster, watcher, releaser *Cluster) {
	clusters = startClusters(t, 3, 2)
	cfg := clusterConfig(t, clusters, 300*time.Millisecond, true)
	return clusters, startClusterMasters(t, cfg), startClusterMasters(t, cfg)
}

// startClusterMasters is startCluster with room for a loaded host: a
// cluster master is up only after its first probe read every slot's marker.
func startClusterMasters(t *testing.T, cfg Config) *Cluster {
	t.Helper()
	c := runCluster(t, cfg)
	var st []MasterStatus
	lockagenttest.Eventually(t, 60*time.Second, func() bool {
		st = c.Status()
		for _, s := range st {
			if s.State != StateUp {
				return false
			}
		}
		return true
	}, "masters never all up: %+v", &st)
	return c
}

// TestShardWatchWakesBySSubscribe: on cluster masters a release reaches a
// watcher of another agent by SPUBLISH to the subscription on the slot's
// owner: no node runs a PUBLISH, none has a classic subscriber, the owner
// has one shard subscriber. A wanted message goes the same way. Closed
// watches leave no shard channel subscribed.
func TestShardWatchWakesBySSubscribe(t *testing.T) {
	t.Parallel() // waits out faults and quarantines; judges no latency
	clusters, watcher, releaser := shardWatchAgents(t)
	ctx := context.Background()
	for _, cl := range clusters {
		eachPrimary(t, cl, func(s *redistest.Server) { s.Do("CONFIG", "RESETSTAT") })
	}
	const name = "ssub"
	ch := watcher.keys.Channel(name)
	w := watcher.Watch(ctx, name)
	defer w.Close()
	awaitShardSubscribed(t, clusters, ch)
	releaseWakes(t, w, releaser, name, "h")
	releaser.Wanted(name, Want{Count: 1})
	select {
	case <-w.Wanted():
	case <-time.After(10 * time.Second):
		t.Fatal("the wanted message did not arrive")
	}
	for i, cl := range clusters {
		classic, published, spublished := 0, 0, 0
		eachPrimary(t, cl, func(s *redistest.Server) {
			classic += pubsubCount(t, s, "NUMSUB", ch)
			published += commandCalls(t, s, "publish")
			spublished += commandCalls(t, s, "spublish")
		})
		if classic != 0 || published != 0 || spublished == 0 {
			t.Fatalf("cluster %d: %d classic subscribers, %d PUBLISH, %d SPUBLISH: want 0, 0, some", i, classic, published, spublished)
		}
	}
	closeManyWatches(t, watcher, 2000)
	w.Close()
	left := 0
	lockagenttest.Eventually(t, 30*time.Second, func() bool { left = shardChannels(t, clusters); return left == 0 }, // polls: no event says an unsubscription landed
		"%d shard channels still subscribed after every watch was closed", &left)
}

// TestShardWatchFollowsTheSlot: when the name's slot moves to another shard,
// and when the shard that serves it restarts empty, the subscription is
// made anew at the slot's owner, the watch is told to look again
// (Recheck), and messages reach it again: a release of a hold taken before
// the slot moved (its keys moved with it), and, since a shard that lost
// its data lost the hold too, a wanted message after the restart. Both
// faults quarantine the slot for longer than the test: noting a quarantine
// wakes every watch, once, so each check waits until the watcher noted it.
func TestShardWatchFollowsTheSlot(t *testing.T) {
	t.Parallel() // waits out faults and quarantines; judges no latency
	clusters := startClusters(t, 3, 2)
	cfg := clusterConfig(t, clusters, time.Minute, true)
	watcher, releaser := startClusterMasters(t, cfg), startClusterMasters(t, cfg)
	ctx := context.Background()
	const name = "follow"
	ch := watcher.keys.Channel(name)
	slot := redistest.SlotOf(ch)
	w := watcher.Watch(ctx, name)
	defer w.Close()
	awaitShardSubscribed(t, clusters, ch)
	holder := take(t, releaser, name, "moved")

	drain(w.Recheck())
	for _, cl := range clusters {
		to := cl.Shards()[0]
		if cl.Owner(slot) == to {
			to = cl.Shards()[1]
		}
		cl.MigrateSlot(slot, to)
	}
	awaitRecheck(t, w, "the slot moved")
	awaitShardSubscribed(t, clusters, ch)
	awaitQuarantineNoted(t, watcher, len(clusters))
	wakesAtRelease(t, w, releaser, name, holder)

	drain(w.Recheck())
	for _, cl := range clusters {
		cl.RestartEmpty(cl.Owner(slot))
	}
	awaitRecheck(t, w, "the shard restarted empty")
	awaitShardSubscribed(t, clusters, ch)
	drain(w.Wanted())
	releaser.Wanted(name, Want{Count: 1})
	select {
	case <-w.Wanted():
	case <-time.After(10 * time.Second):
		t.Fatal("no wanted message after the shard restarted empty")
	}
}

// take takes name with c once its slot votes, for a lease longer than
// the test, and returns the holder that won: each attempt has its own,
// since a failed attempt's give-back leaves its holder a tombstone.
func take(t *testing.T, c *Cluster, name, holder string) string {
	t.Helper()
	var err error
	try := 0
	lockagenttest.Eventually(t, 30*time.Second, func() bool {
		try++
		r := req(name, fmt.Sprintf("%s-%d", holder, try))
		r.Lease = time.Minute
		_, err = acquire(context.Background(), c, r)
		return err == nil
	}, "%s was never granted: %v", name, &err)
	return fmt.Sprintf("%s-%d", holder, try)
}

// releaseWakes takes name with releaser, as holder, waits until the
// watcher's Cluster knows no slot quarantined (noting one wakes every
// watch), and says w wakes at the release.
func releaseWakes(t *testing.T, w *Watch, releaser *Cluster, name, holder string) {
	t.Helper()
	holder = take(t, releaser, name, holder)
	lockagenttest.Eventually(t, 10*time.Second, func() bool { return quarantinedSlots(w.c) == 0 },
		"the watcher's masters keep a slot quarantined")
	wakesAtRelease(t, w, releaser, name, holder)
}

// wakesAtRelease says w wakes when releaser releases holder's hold of name.
func wakesAtRelease(t *testing.T, w *Watch, releaser *Cluster, name, holder string) {
	t.Helper()
	drain(w.C())
	// Release returns once a majority answered, or at its deadline, and
	// lands in the background: the count it returns may miss the holds.
	if _, err := releaser.Release(context.Background(), name, holder); err != nil {
		t.Fatalf("release: %v", err)
	}
	select {
	case <-w.C():
	case <-time.After(10 * time.Second):
		t.Fatal("the release did not wake the watch")
	}
}

// awaitQuarantineNoted waits until c knows a quarantined slot on each of
// its n masters: after a probe's sweep of every slot, slow on a loaded host.
func awaitQuarantineNoted(t *testing.T, c *Cluster, n int) {
	t.Helper()
	var st []MasterStatus
	lockagenttest.Eventually(t, 60*time.Second, func() bool {
		st = c.Status()
		noted := 0
		for _, m := range st {
			for _, sh := range m.Shards {
				if sh.QuarantinedSlots > 0 {
					noted++
					break
				}
			}
		}
		return noted == n
	}, "the quarantine was not noted on every master: %+v", &st)
}

// quarantinedSlots counts the slots c knows quarantined on its masters.
func quarantinedSlots(c *Cluster) (n int) {
	for _, st := range c.Status() {
		for _, sh := range st.Shards {
			n += sh.QuarantinedSlots
		}
	}
	return n
}

func awaitRecheck(t *testing.T, w *Watch, after string) {
	t.Helper()
	select {
	case <-w.Recheck():
	case <-time.After(30 * time.Second):
		t.Fatalf("no Recheck after %s", after)
	}
}

// drain empties a coalescing channel.
func drain(ch <-chan struct{}) {
	select {
	case <-ch:
	default:
	}
}

// awaitShardSubscribed waits until, in every cluster, the owner of ch's
// slot has one shard subscriber of ch and no other primary has one.
func awaitShardSubscribed(t *testing.T, clusters []*redistest.Cluster, ch string) {
	t.Helper()
	where := ""
	lockagenttest.Eventually(t, 30*time.Second, func() bool { // polls: the subscriptions are the servers' to show
		where = ""
		for i, cl := range clusters {
			owner := cl.Owner(redistest.SlotOf(ch)).Primary
			eachPrimary(t, cl, func(s *redistest.Server) {
				if n := pubsubCount(t, s, "SHARDNUMSUB", ch); (s == owner) != (n == 1) {
					where += fmt.Sprintf(" cluster %d %s (owner %v): %d;", i, s.Addr, s == owner, n)
				}
			})
		}
		return where == ""
	}, "shard subscribers of %s:%s", ch, &where)
}

func eachPrimary(t *testing.T, cl *redistest.Cluster, f func(*redistest.Server)) {
	for _, sh := range cl.Shards() {
		f(sh.Primary)
	}
}

// pubsubCount is PUBSUB NUMSUB or SHARDNUMSUB of ch on s.
func pubsubCount(t *testing.T, s *redistest.Server, sub, ch string) int {
	t.Helper()
	r, err := s.Array("PUBSUB", sub, ch)
	if err != nil || len(r) != 2 {
		t.Fatalf("PUBSUB %s on %s: %q %v", sub, s.Addr, r, err)
	}
	n, _ := strconv.Atoi(r[1])
	return n
}

// commandCalls is how many times s ran cmd (from scripts too), by INFO
// commandstats.
func commandCalls(t *testing.T, s *redistest.Server, cmd string) int {
	t.Helper()
	info, err := s.Info("commandstats")
	if err != nil {
		t.Fatal(err)
	}
	calls, _, _ := strings.Cut(strings.TrimPrefix(redistest.InfoField(info, "cmdstat_"+cmd), "calls="), ",")
	n, _ := strconv.Atoi(calls)
	return n
}

// shardChannels counts the shard channels of the test's prefix
// subscribed on every primary.
func shardChannels(t *testing.T, clusters []*redistest.Cluster) (n int) {
	for _, cl := range clusters {
		eachPrimary(t, cl, func(s *redistest.Server) {
			r, err := s.Array("PUBSUB", "SHARDCHANNELS", "t:*")
			if err != nil {
				t.Fatal(err)
			}
			n += len(r)
		})
	}
	return n
}

// closeManyWatches opens n watches at once, each closed as soon as a
// master confirmed it.
func closeManyWatches(t *testing.T, c *Cluster, n int) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := c.Watch(context.Background(), fmt.Sprintf("leak%d", i))
			select {
			case <-w.Recheck():
			case <-time.After(10 * time.Second):
			}
			w.Close()
		}()
	}
	wg.Wait()
}
