package quorum

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
	"github.com/lock-agent/lock-agent/quorum/hashslot"
	"github.com/lock-agent/lock-agent/quorum/scripts"
)

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
			n += cl.Owner(hashslot.Of(key)).Primary.Keys(key)
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
	t.Parallel() // waits out faults and quarantines; judges no latency
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
		awaitGone(t, clusters, c.keys.Holder(name, h1)) // the release lands on the last master just after
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

// slotsFrom are the slots first through last.
func slotsFrom(first, last int) []int {
	var out []int
	for slot := first; slot <= last; slot++ {
		out = append(out, slot)
	}
	return out
}

// TestShardSetForgetsSlotsNoShardServes: a slot that no shard serves any
// more (its shard left the topology, its slots uncovered) is judged by no
// shard, not by the one that now has its old place in the list.
func TestShardSetForgetsSlotsNoShardServes(t *testing.T) {
	c, err := New(Config{KeyPrefix: "t:", Masters: []MasterConfig{{Name: "c", Cluster: []string{"127.0.0.1:1"}}}})
	if err != nil {
		t.Fatal(err)
	}
	s := c.masters[0].shards
	a := &shard{addr: "a:1", slots: slotsFrom(0, 5000), state: StateUp}
	b := &shard{addr: "b:1", slots: slotsFrom(5001, 10000), state: StateUp}
	down := &shard{addr: "c:1", slots: slotsFrom(10001, hashslot.Count-1), state: StateDown}
	s.update([]*shard{a, b, down}, "a,b,c")
	if err := s.slotErr(6000); err != nil {
		t.Fatalf("slot 6000 of the up shard b: %v", err)
	}
	s.update([]*shard{a, down}, "a,c") // b gone, its slots served by none
	if err := s.slotErr(6000); err != nil {
		t.Fatalf("slot 6000, which no shard serves, is judged by another shard: %v", err)
	}
	if err := s.slotErr(12000); !errors.Is(err, ErrMasterDown) {
		t.Fatalf("slot 12000 of the down shard: %v, want ErrMasterDown", err)
	}
}

// TestClusterShardRestartedEmptyQuarantinesItsSlotsOnly: a shard restarts
// empty while no call meets it: the probe sees its first marker change and
// sweeps, and then knows every slot of that shard quarantined, and none of
// the others'; a name in another shard is granted meanwhile, one in the
// emptied shard refused at once.
func TestClusterShardRestartedEmptyQuarantinesItsSlotsOnly(t *testing.T) {
	t.Parallel() // waits out faults and quarantines; judges no latency
	clusters := startClusters(t, 1, 3)
	// A quarantine that outlasts the test on a loaded host: it costs no
	// wait, as nothing waits for it to end.
	c := startCluster(t, clusterConfig(t, clusters, time.Minute, true))
	emptied := clusters[0].Shards()[0]
	clusters[0].RestartEmpty(emptied)
	want := 0
	for _, r := range emptied.Slots() {
		want += r.Last - r.First + 1
	}
	var shards []ShardStatus
	lockagenttest.Eventually(t, 20*time.Second, func() bool {
		shards = c.Status()[0].Shards
		return len(shards) == 3 && shards[0].QuarantinedSlots == want && shards[1].QuarantinedSlots == 0 && shards[2].QuarantinedSlots == 0
	}, "the probe never knew the emptied shard's %d slots, and only them, quarantined: %+v", want, &shards)
	var inEmptied, elsewhere string
	for i := 0; inEmptied == "" || elsewhere == ""; i++ {
		name := fmt.Sprintf("r%d", i)
		if clusters[0].Owner(redistest.SlotOf(name)) == emptied {
			inEmptied = name
		} else {
			elsewhere = name
		}
	}
	ctx := context.Background()
	if _, _, err := acquireWithRetries(ctx, c, func(try int) AcquireRequest { return req(elsewhere, fmt.Sprintf("h-%d", try)) }); err != nil {
		t.Fatalf("%s, in a shard that kept its data: %v", elsewhere, err)
	}
	if _, refusal, err := c.Acquire(ctx, req(inEmptied, "h")); err == nil && refusal == nil {
		t.Fatalf("%s, in the emptied shard, granted during its quarantine", inEmptied)
	}
}

// TestClusterShardUnsafeRefusesItsSlotsOnly: one shard's primary may evict
// keys: the probe finds its primary among the client's nodes and checks it,
// the shard is unsafe and a name in its slots is refused at once, and a
// name in another shard is granted.
func TestClusterShardUnsafeRefusesItsSlotsOnly(t *testing.T) {
	t.Parallel() // waits out faults and quarantines; judges no latency
	clusters := startClusters(t, 1, 3)
	cfg := clusterConfig(t, clusters, time.Second, true)
	cfg.SafetyInterval = 50 * time.Millisecond
	c := startCluster(t, cfg)
	unsafe := clusters[0].Shards()[1]
	if _, err := unsafe.Primary.Do("CONFIG", "SET", "maxmemory-policy", "allkeys-lru"); err != nil {
		t.Fatal(err)
	}
	var shards []ShardStatus
	lockagenttest.Eventually(t, 20*time.Second, func() bool {
		shards = c.Status()[0].Shards
		return len(shards) == 3 && shards[1].State == StateUnsafe && shards[0].State == StateUp && shards[2].State == StateUp
	}, "the shard that may evict was never found unsafe, alone: %+v", &shards)
	var inUnsafe, elsewhere string
	for i := 0; inUnsafe == "" || elsewhere == ""; i++ {
		name := fmt.Sprintf("u%d", i)
		if clusters[0].Owner(redistest.SlotOf(name)) == unsafe {
			inUnsafe = name
		} else {
			elsewhere = name
		}
	}
	ctx := context.Background()
	_, refusal, err := c.Acquire(ctx, req(inUnsafe, "h"))
	if err != nil {
		t.Fatal(err)
	}
	if refusal == nil || !strings.Contains(refusal.Err().Error(), "unsafe") {
		t.Fatalf("%s, in the unsafe shard: refusal %v, want one that says unsafe", inUnsafe, refusal)
	}
	if _, _, err := acquireWithRetries(ctx, c, func(try int) AcquireRequest { return req(elsewhere, fmt.Sprintf("h-%d", try)) }); err != nil {
		t.Fatalf("%s, in a safe shard: %v", elsewhere, err)
	}
}

// TestClusterQuarantinedSlotDoesNotAnswerReads: a slot the agent knows
// quarantined (its shard restarted empty) does not answer a read either
// (who), as a quarantined standalone master is skipped by every round
// that votes: its "no holder" is what it forgot, not what it knows.
func TestClusterQuarantinedSlotDoesNotAnswerReads(t *testing.T) {
	t.Parallel() // waits out faults and quarantines; judges no latency
	clusters := startClusters(t, 1, 3)
	c := startCluster(t, clusterConfig(t, clusters, time.Minute, true))
	emptied := clusters[0].Shards()[0]
	name := ""
	for i := 0; name == ""; i++ {
		if n := fmt.Sprintf("w%d", i); clusters[0].Owner(redistest.SlotOf(n)) == emptied {
			name = n
		}
	}
	ctx := context.Background()
	if _, _, err := acquireWithRetries(ctx, c, func(try int) AcquireRequest { return req(name, fmt.Sprintf("h-%d", try)) }); err != nil {
		t.Fatal(err)
	}
	clusters[0].RestartEmpty(emptied)
	slot := hashslot.Of(c.keys.Set(name))
	var shards []ShardStatus
	lockagenttest.Eventually(t, 20*time.Second, func() bool {
		shards = c.Status()[0].Shards
		return errors.Is(c.masters[0].shards.slotErr(slot), ErrQuarantined)
	}, "the slot of %s was never known quarantined: %+v", name, &shards)
	if holders, err := c.Who(ctx, name); !errors.Is(err, ErrNoQuorum) {
		t.Fatalf("who %s on the quarantined slot: %v, %v; want ErrNoQuorum", name, holders, err)
	}
}

// TestRenewalsAreCutPerSlotForClusterMastersOnly: a standalone master's
// renewal of many names is a few full calls whether or not another master
// is a cluster; a cluster master's calls each stay in one slot, and every
// hold is in one call of each.
func TestRenewalsAreCutPerSlotForClusterMastersOnly(t *testing.T) {
	c, err := New(Config{KeyPrefix: "t:", Masters: []MasterConfig{{Name: "a", Address: "127.0.0.1:1"}, {Name: "c", Cluster: []string{"127.0.0.1:2"}}}})
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]RenewKey, 1000)
	for i := range keys {
		keys[i] = RenewKey{Name: fmt.Sprintf("n%d", i), Holder: "h"}
	}
	whole := c.renewCalls(time.Second, keys, false)
	if len(whole.calls) != 4 {
		t.Fatalf("a standalone master's renewal of 1000 holds is %d calls, want 4 of up to %d", len(whole.calls), renewBatch)
	}
	cut := c.renewCalls(time.Second, keys, true)
	seen := map[int]bool{}
	for k, call := range cut.calls {
		slot := -1
		for _, key := range call.keys[1:] { // the marker first
			if s := hashslot.Of(key); slot >= 0 && s != slot {
				t.Fatalf("call %d spans slots %d and %d", k, slot, s)
			} else {
				slot = s
			}
		}
		for _, h := range cut.holds[k] {
			if seen[h] {
				t.Fatalf("hold %d in two calls", h)
			}
			seen[h] = true
		}
	}
	if len(seen) != len(keys) {
		t.Fatalf("%d of %d holds in a call", len(seen), len(keys))
	}
}

// TestClusterSweepReadsNoSlotOfAShardFoundDown: a probe that found a shard
// down (its gate got no answer in time, as a cold connection on a loaded
// host may) and sweeps reads none of that shard's slots, and every other
// shard's. The sweep runs inside the probe: reading them cost the sweep's
// whole deadline on a shard that does not answer, or the gate on each of
// its slots on one that answered late (the probe learned no run_id for
// them), seconds during which no probe ran, so the shard stayed down
// though it answered again at once.
func TestClusterSweepReadsNoSlotOfAShardFoundDown(t *testing.T) {
	t.Parallel() // waits out faults and quarantines; judges no latency
	clusters, _, m := connectedClusterMaster(t)
	ctx := context.Background()
	// The probe's steps up to its sweep (see probeShards), the gate on
	// the last shard having failed as a late answer leaves it.
	list, topo, err := m.readTopology(ctx)
	if err != nil || len(list) != 3 {
		t.Fatalf("topology: %d shards, %v", len(list), err)
	}
	m.gateShards(ctx, list)
	downAddr := clusters[0].Shards()[2].Primary.Addr
	for _, sh := range list {
		if sh.addr == downAddr {
			*sh = shard{addr: sh.addr, slots: sh.slots, state: StateDown, err: context.DeadlineExceeded}
		} else if sh.state != StateUp {
			t.Fatalf("shard %s: %v %v, want up", sh.addr, sh.state, sh.err)
		}
	}
	if !m.shards.update(list, topo) {
		t.Fatal("the first view of the shards asks for no sweep")
	}
	before := map[string]int{}
	for _, sh := range clusters[0].Shards() {
		before[sh.Primary.Addr] = commandCalls(t, sh.Primary, "hmget")
	}
	m.sweepSlots(ctx)
	for _, sh := range clusters[0].Shards() {
		read := commandCalls(t, sh.Primary, "hmget") - before[sh.Primary.Addr]
		switch {
		case sh.Primary.Addr == downAddr && read != 0:
			t.Errorf("the sweep read shard %s, which the probe found down (%d HMGETs, by itself and its scripts)", downAddr, read)
		case sh.Primary.Addr != downAddr && read == 0:
			t.Errorf("the sweep read no slot of shard %s, which is up", sh.Primary.Addr)
		}
	}
}

// TestClusterSweepReadsOnlyTheSlotsThatMayHaveChanged: once every slot
// was read, a shard that lost its data (FLUSHALL: its first marker is
// gone) makes the probe sweep that shard's slots, and none of the others';
// a sweep cut short (its deadline, here its context ended) leaves what it
// did not read to the next. The sweep read every slot of the cluster each
// time, and its deadline (5s) covers the reads and the gate on each
// suspect slot: on a loaded host the reads alone took 2-4.5s, so after a
// failover the sweeps, each starting again at slot 0, never reached most
// of the promoted shard's slots, and nothing else plants them anew once no
// call comes (TestBreaker20ClusterPrimaryKilled: "the slot of cb-kill was
// never planted anew", 10s after the new primary could take writes).
func TestClusterSweepReadsOnlyTheSlotsThatMayHaveChanged(t *testing.T) {
	t.Parallel() // judges no latency
	clusters, _, m := connectedClusterMaster(t)
	ctx := context.Background()
	probe := func() bool { // the probe's steps up to its sweep (see probeShards)
		list, topo, err := m.readTopology(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m.gateShards(ctx, list)
		changed := m.shards.update(list, topo)
		m.noteShardMarkers(list) // this agent may plant (see Cluster.mayPlant)
		return changed
	}
	if !probe() {
		t.Fatal("the first view of the shards asks for no sweep")
	}
	m.sweepSlots(ctx)
	if m.shards.sweep.Load() {
		t.Fatal("the first sweep left slots unread on a cluster that answers")
	}
	shards := clusters[0].Shards()
	flushed := shards[1]
	if _, err := flushed.Primary.Do("FLUSHALL"); err != nil {
		t.Fatal(err)
	}
	if !probe() {
		t.Fatal("a shard whose first marker is gone asks for no sweep")
	}
	reads := func() map[string]int {
		n := map[string]int{}
		for _, sh := range shards {
			n[sh.Primary.Addr] = commandCalls(t, sh.Primary, "hmget")
		}
		return n
	}
	before := reads()
	cut, cancel := context.WithCancel(ctx)
	cancel()
	m.sweepSlots(cut)
	if !m.shards.sweep.Load() {
		t.Error("a sweep that read nothing asks for no other")
	}
	m.sweepSlots(ctx)
	after := reads()
	for _, sh := range shards {
		read := after[sh.Primary.Addr] - before[sh.Primary.Addr]
		switch {
		case sh == flushed && read == 0:
			t.Errorf("the sweep read no slot of shard %s, which lost its data", sh.Primary.Addr)
		case sh != flushed && read != 0:
			t.Errorf("the sweep read %d slots of shard %s, whose first marker did not change", read, sh.Primary.Addr)
		}
	}
	var total int
	for _, r := range flushed.Slots() {
		total += r.Last - r.First + 1
	}
	if n, _ := flushed.Primary.Do("DBSIZE"); n != strconv.Itoa(total) {
		t.Errorf("%s keys on the flushed shard after the sweep, want a marker planted anew in each of its %d slots", n, total)
	}
}

// TestSweepOrder: a sweep reads first the slots a round's call met, the
// latest first, then those marked pending last, then by slot.
func TestSweepOrder(t *testing.T) {
	for _, tc := range []struct {
		name  string
		slots []int
		marks map[int]uint32
		met   map[int]int64
		want  []int
	}{
		{"by slot", []int{9, 3, 7}, nil, nil, []int{3, 7, 9}},
		{"last marked first", []int{1, 2, 3, 4}, map[int]uint32{1: 1, 2: 1, 3: 2, 4: 2}, nil, []int{3, 4, 1, 2}},
		{"met first, latest first", []int{1, 2, 3, 4}, map[int]uint32{1: 1, 2: 1, 3: 2, 4: 2}, map[int]int64{2: 10, 1: 20}, []int{1, 2, 3, 4}},
		{"met beats marked later", []int{100, 16000}, map[int]uint32{100: 5, 16000: 1}, map[int]int64{16000: 1}, []int{16000, 100}},
	} {
		var marks [hashslot.Count]uint32
		var met [hashslot.Count]int64
		for slot, m := range tc.marks {
			marks[slot] = m
		}
		for slot, at := range tc.met {
			met[slot] = at
		}
		got := append([]int(nil), tc.slots...)
		sweepOrder(got, &marks, &met)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestClusterState: a cluster master is up when one of its shards is up or
// quarantined, else in the state most of its shards are in.
func TestClusterState(t *testing.T) {
	up, down, unsafe, settings, quar := StateUp, StateDown, StateUnsafe, StateSettings, StateQuarantined
	for _, tc := range []struct {
		shards []State
		want   State
		at     int // a shard in that state, if not up
	}{
		{[]State{up, up, up}, up, 0},
		{[]State{down, down, up}, up, 0},
		{[]State{settings, quar, down}, up, 0},
		{[]State{quar, quar, quar}, up, 0},
		{[]State{down, down, down}, down, 0},
		{[]State{settings, down, down}, down, 1},
		{[]State{settings, settings, down}, settings, 0},
		{[]State{settings, down}, down, 1},
		{[]State{unsafe, settings}, unsafe, 0},
		{[]State{down, unsafe, unsafe, settings}, unsafe, 1},
		{[]State{settings}, settings, 0},
		{[]State{State("other")}, down, 0},
	} {
		got, at := clusterState(tc.shards)
		if got != tc.want || got != up && at != tc.at {
			t.Errorf("shards %v: %v (shard %d), want %v (shard %d)", tc.shards, got, at, tc.want, tc.at)
		}
	}
}

// TestClusterSweepPlantsTheSlotOfANameInUseFirst: a shard lost its data
// (FLUSHALL) and no call came since; a name this agent used before sits
// past the first chunk of the shard's slots. The sweep's first chunk plants
// the name's slot anew: a sweep cut short by its deadline on a loaded host
// read the slots in order, and a failover's promoted shard never had the
// slot of the name in use planted within ten seconds
// (TestBreaker20ClusterPrimaryKilled: "the slot of cb-kill was never
// planted anew", its shard's slots queued behind the agent's first sweep).
func TestClusterSweepPlantsTheSlotOfANameInUseFirst(t *testing.T) {
	t.Parallel() // judges no latency
	clusters, c, m := connectedClusterMaster(t)
	ctx := context.Background()
	probe := func() { // the probe's steps up to its sweep (see probeShards)
		list, topo, err := m.readTopology(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m.gateShards(ctx, list)
		m.shards.update(list, topo)
		m.noteShardMarkers(list) // this agent may plant (see Cluster.mayPlant)
	}
	probe()
	m.sweepSlots(ctx)
	flushed := clusters[0].Shards()[2]
	first := flushed.Slots()[0].First
	var name string
	var slot int
	var keys, args []string
	for i := 0; ; i++ {
		name = fmt.Sprintf("in-use-%d", i)
		keys, args = c.releaseArgs(name, "nobody", name)
		if slot, _ = c.keys.CallSlot(keys); slot >= first+slotChunk && clusters[0].Owner(slot) == flushed {
			break
		}
	}
	// A round's call on the name: a release of a hold it does not have.
	if err := m.eval(ctx, scripts.Release, keys, args).Error(); err != nil {
		t.Fatal(err)
	}
	if _, err := flushed.Primary.Do("FLUSHALL"); err != nil {
		t.Fatal(err)
	}
	probe()
	slots, marks := m.shards.toSweep()
	if len(slots) <= slotChunk || slots[0] != slot {
		t.Fatalf("the sweep reads %d slots, first %v; want more than a chunk, the name's slot %d first", len(slots), slots[:min(3, len(slots))], slot)
	}
	tally := m.newSweepRun(marks)
	m.sweepPart(ctx, slots[:slotChunk], tally)
	if epoch, err := flushed.Primary.Do("HGET", c.keys.SlotMarker(slot), "epoch"); err != nil || epoch == "" {
		t.Errorf("after the sweep's first chunk, slot %d of %s has no marker planted anew (%q, %v)", slot, name, epoch, err)
	}
	if len(tally.lost) == 0 || tally.failed != 0 {
		t.Errorf("the first chunk found %d slots quarantined, %d unread; want some, none", len(tally.lost), tally.failed)
	}
}

// TestClusterSlotsWhoseTailsWentUnsettledAreReadAgain: a sweep takes a
// slot it found quarantined off the pending ones, and settles its tails
// after its last chunk, within what is left of its deadline; a slot whose
// horizon it could not read then (here its context has ended) is read again
// at the next sweep, else it kept tails=pending and a quarantine not
// lengthened to the tails the other masters keep until the slots moved.
func TestClusterSlotsWhoseTailsWentUnsettledAreReadAgain(t *testing.T) {
	t.Parallel() // judges no latency
	_, _, m := connectedClusterMaster(t)
	ctx := context.Background()
	list, topo, err := m.readTopology(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m.gateShards(ctx, list)
	m.shards.update(list, topo)
	m.noteShardMarkers(list)
	m.sweepSlots(ctx)
	if slots, _ := m.shards.toSweep(); len(slots) != 0 || m.shards.sweep.Load() {
		t.Fatalf("%d slots pending after a sweep of a cluster that answers", len(slots))
	}
	cut, cancel := context.WithCancel(ctx)
	cancel()
	m.settleSlotTails(cut, []int{7, 9000})
	slots, _ := m.shards.toSweep()
	if fmt.Sprint(slots) != "[9000 7]" && fmt.Sprint(slots) != "[7 9000]" || !m.shards.sweep.Load() {
		t.Errorf("slots whose horizon went unread: pending %v, sweep asked %v; want both, and a sweep", slots, m.shards.sweep.Load())
	}
}

// TestClusterProbeLoadsTheScriptsWhenItsGateTimedOut: the nodes of a
// cluster master know no script, and the probe's gate gets one shard's
// answer only after the probe's deadline (its primary holds every script:
// CLIENT PAUSE WRITE): the others' NOSCRIPT came in time, but the loads
// that followed it inside the gate had no deadline left. The probe still
// leaves every script in every node's cache: else each next probe met
// NOSCRIPT again on a loaded host, where that answer alone took most of
// the probe's budget, and the shards stayed down while every node
// answered.
func TestClusterProbeLoadsTheScriptsWhenItsGateTimedOut(t *testing.T) {
	t.Parallel() // waits out faults and quarantines; judges no latency
	clusters, c, m := connectedClusterMaster(t)
	ctx := context.Background()
	late := clusters[0].Shards()[0].Primary
	budget := max(4*c.cfg.MasterTimeout, 500*time.Millisecond, 4*m.timeout()) // probeShards'
	if _, err := late.Do("CLIENT", "PAUSE", strconv.Itoa(int((2 * budget).Milliseconds())), "WRITE"); err != nil {
		t.Fatal(err)
	}
	m.probe(ctx)
	for _, sh := range m.status().Shards {
		if sh.Address == late.Addr && sh.State != StateDown {
			t.Fatalf("shard %s, paused past the probe's deadline: %+v, want down", late.Addr, sh)
		}
	}
	for _, sh := range clusters[0].Shards() {
		for _, s := range scripts.All {
			known, err := sh.Primary.Array("SCRIPT", "EXISTS", s.Sharded.SHA)
			if err != nil || len(known) != 1 || known[0] != "1" {
				t.Errorf("after the probe, %s does not know a script a cluster master runs (%v %v)", sh.Primary.Addr, known, err)
				break
			}
		}
	}
}

// connectedClusterMaster is a Cluster over one Redis Cluster of three
// shards, and its master, connected: no probe has run yet.
func connectedClusterMaster(t *testing.T) ([]*redistest.Cluster, *Cluster, *master) {
	t.Helper()
	clusters := startClusters(t, 1, 3)
	c, err := New(clusterConfig(t, clusters, time.Second, true))
	if err != nil {
		t.Fatal(err)
	}
	m := c.masters[0]
	m.connect(context.Background())
	t.Cleanup(m.close)
	return clusters, c, m
}

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
	closed := time.Now()
	left := 0
	lockagenttest.Eventually(t, 30*time.Second, func() bool { left = shardChannels(t, clusters); return left == 0 }, // polls: no event says an unsubscription landed
		"%d shard channels still subscribed after every watch was closed", &left)
	t.Logf("every shard channel unsubscribed %v after the last watch was closed", time.Since(closed))
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
