package redistest

import (
	"context"
	"crypto/tls"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/rueidis"
)

// dialLog records every address a rueidis client dials.
type dialLog struct {
	mu    sync.Mutex
	addrs []string
}

func (d *dialLog) dial(ctx context.Context, addr string, dialer *net.Dialer, _ *tls.Config) (net.Conn, error) {
	d.mu.Lock()
	d.addrs = append(d.addrs, addr)
	d.mu.Unlock()
	return dialer.DialContext(ctx, "tcp", addr)
}

// list is what was dialed so far (the client dials from its own goroutines).
func (d *dialLog) list() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.addrs)
}

func (d *dialLog) dialed(addr string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Contains(d.addrs, addr)
}

// errorCount is how many errors starting with prefix (MOVED, ASK,
// TRYAGAIN, CLUSTERDOWN) s has replied, by INFO errorstats.
func errorCount(t *testing.T, s *Server, prefix string) int {
	t.Helper()
	info, err := s.Info("errorstats")
	if err != nil {
		t.Fatal(err)
	}
	count, _ := strings.CutPrefix(InfoField(info, "errorstat_"+prefix), "count=")
	n, _ := strconv.Atoi(count)
	return n
}

// existsScript answers how many of its keys exist.
const existsScript = "return redis.call('exists', unpack(KEYS))"

// TestRueidisInCluster: a rueidis v1 cluster client with the options the
// quorum uses (no retries, no cache) dials every primary through DialCtxFn
// (not the replicas; a promoted replica once a MOVED sends it there),
// follows MOVED and ASK by itself, and returns TRYAGAIN and CLUSTERDOWN as
// errors, sending the command once. The servers' error counts (INFO
// errorstats) show which redirections happened.
func TestRueidisInCluster(t *testing.T) {
	c := StartCluster(t, ClusterOptions{Shards: 3, Replicas: 1})
	dials := &dialLog{}
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: c.Seeds(), DisableRetry: true,
		DisableCache: true, DialCtxFn: dials.dial})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	t.Logf("dialed by NewClient: %v", dials.list())
	exists := func(keys ...string) (int64, error) {
		cmd := client.B().Eval().Script(existsScript).Numkeys(int64(len(keys))).Key(keys...).Build()
		return client.Do(context.Background(), cmd).AsInt64()
	}
	for _, sh := range c.Shards() {
		key := c.keyIn(sh)
		if n, err := exists(key); err != nil || n != 0 {
			t.Fatalf("a script on %s: %d %v", key, n, err)
		}
		if !dials.dialed(sh.Primary.Addr) {
			t.Fatalf("the client did not dial %s; it dialed %v", sh.Primary.Addr, dials.list())
		}
	}
	t.Logf("dialed after a script on every shard: %v", dials.list())
	t.Run("it follows MOVED after a slot moved", func(t *testing.T) { rueidisMoved(t, c, exists) })
	t.Run("it follows ASK, and returns TRYAGAIN once", func(t *testing.T) { rueidisAsk(t, c, exists) })
	t.Run("it returns CLUSTERDOWN once", func(t *testing.T) { rueidisClusterDown(t, c, exists) })
	t.Run("it dials a promoted replica", func(t *testing.T) { rueidisPromoted(t, c, dials, exists) })
}

func rueidisMoved(t *testing.T, c *Cluster, exists func(...string) (int64, error)) {
	slot := SlotOf("{moved}")
	from := c.Owner(slot)
	c.mustDo(from.Primary, "SET", "{moved}", "v")
	to := c.Shards()[(slices.Index(c.Shards(), from)+1)%len(c.Shards())]
	c.MigrateSlot(slot, to)
	moved := errorCount(t, from.Primary, "MOVED")
	if n, err := exists("{moved}"); err != nil || n != 1 {
		t.Fatalf("the script after the slot moved: %d %v", n, err)
	}
	if got := errorCount(t, from.Primary, "MOVED") - moved; got != 1 {
		t.Fatalf("the old owner answered %d MOVED, want 1 (the client's map was stale)", got)
	}
}

func rueidisAsk(t *testing.T, c *Cluster, exists func(...string) (int64, error)) {
	slot := SlotOf("{ask}")
	from := c.Owner(slot)
	for _, key := range []string{"{ask}:a", "{ask}:b"} {
		c.mustDo(from.Primary, "SET", key, "v")
	}
	if n, err := exists("{ask}:a"); err != nil || n != 1 { // the client learns where the slot is
		t.Fatalf("the script before the migration: %d %v", n, err)
	}
	to := c.Shards()[(slices.Index(c.Shards(), from)+1)%len(c.Shards())]
	m := c.BeginMigration(slot, to)
	c.mustDo(from.Primary, "MIGRATE", "127.0.0.1", strconv.Itoa(to.Primary.port), "{ask}:a", "0", "5000")
	ask, tryAgain := errorCount(t, from.Primary, "ASK"), errorCount(t, from.Primary, "TRYAGAIN")
	if n, err := exists("{ask}:a"); err != nil || n != 1 {
		t.Fatalf("the script on a key that moved to the importing shard: %d %v", n, err)
	}
	if got := errorCount(t, from.Primary, "ASK") - ask; got != 1 {
		t.Fatalf("the source answered %d ASK, want 1", got)
	}
	_, err := exists("{ask}:a", "{ask}:b")
	if re, ok := rueidis.IsRedisErr(err); !ok || !re.IsTryAgain() {
		t.Fatalf("a script on a moved and a staying key: %v, want TRYAGAIN", err)
	}
	if got := errorCount(t, from.Primary, "TRYAGAIN") - tryAgain; got != 1 {
		t.Fatalf("the source answered %d TRYAGAIN, want 1 (no retry)", got)
	}
	m.Finish()
}

func rueidisClusterDown(t *testing.T, c *Cluster, exists func(...string) (int64, error)) {
	slot := SlotOf("{down}")
	owner := c.Owner(slot).Primary
	// The owner forgets its slot: it no longer serves it, and (full
	// coverage required) says the cluster is down.
	c.mustDo(owner, "CLUSTER", "DELSLOTS", strconv.Itoa(slot))
	down := errorCount(t, owner, "CLUSTERDOWN")
	_, err := exists("{down}")
	if re, ok := rueidis.IsRedisErr(err); !ok || !re.IsClusterDown() {
		t.Fatalf("a script on a slot its owner does not serve: %v, want CLUSTERDOWN", err)
	}
	if got := errorCount(t, owner, "CLUSTERDOWN") - down; got != 1 {
		t.Fatalf("the owner answered %d CLUSTERDOWN, want 1 (no retry)", got)
	}
	c.mustDo(owner, "CLUSTER", "ADDSLOTS", strconv.Itoa(slot))
	c.settle("slot " + strconv.Itoa(slot) + " served again")
}

func rueidisPromoted(t *testing.T, c *Cluster, dials *dialLog, exists func(...string) (int64, error)) {
	slot := SlotOf("{promoted}")
	sh := c.Owner(slot)
	old := sh.Primary
	c.Failover(sh)
	moved := errorCount(t, old, "MOVED")
	if n, err := exists("{promoted}"); err != nil || n != 0 {
		t.Fatalf("the script after the failover: %d %v", n, err)
	}
	// The client learns of the failover from one MOVED of the old primary,
	// or from a refresh of its own that came first (a loaded host): never
	// from more than one, since the script is not sent again.
	if got := errorCount(t, old, "MOVED") - moved; got > 1 {
		t.Fatalf("the old primary answered %d MOVED, want at most 1", got)
	}
	if !dials.dialed(sh.Primary.Addr) {
		t.Fatalf("the client did not dial the promoted %s; it dialed %v", sh.Primary.Addr, dials.list())
	}
}
