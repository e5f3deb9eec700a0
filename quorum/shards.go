package quorum

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lock-agent/lock-agent/quorum/hashslot"
	"github.com/lock-agent/lock-agent/quorum/rules"
	"github.com/lock-agent/lock-agent/quorum/scripts"
	"github.com/redis/rueidis"
)

// A master may be a Redis Cluster (MasterConfig.Cluster): one voter made of
// all its shards, reached with the client library's cluster client, which
// sends each call to the shard that serves its keys' slot and follows
// MOVED and ASK (the command did not run there; it is sent once to the
// slot's owner). What is per master on a standalone one is per hash slot
// on such a master, because a script may only touch the keys of one slot
// (see package hashslot):
//
//   - Each slot has its own epoch marker, planted and gated as a standalone
//     master's is, by every script that votes on a name of that slot. A
//     shard that restarted empty lost the markers of its slots, so each of
//     those slots sits out its own quarantine; the other shards' slots
//     vote on.
//   - Every gate on such a master reads the server's run_id (the variant
//     of the scripts that a standalone master runs only on a new
//     connection: see scripts.Script.AfterRestart). A slot's marker records the
//     run_id of the server that planted it, so a slot now served by
//     another server (a promoted replica that may have missed the last
//     grants, a restart from a snapshot, a slot migrated with its keys) is
//     planted anew, quarantined. A cluster client makes connections to
//     many servers as slots move; no one connection says which slots it
//     serves, so the check is made on every call.
//   - The probe reads the cluster's slots (CLUSTER SLOTS) and the marker of
//     each shard's first slot every probe interval; when a shard's marker
//     changed, the slots moved, or a call met a quarantined slot, it reads
//     the markers of the slots concerned (that shard's, those that moved;
//     sweep, which goes on where one cut short stopped), planting where
//     the agent may, and
//     settles the tails of the slots that lost their data (see the tail horizon in gate.go).
//     The agent refuses at once a call on a slot it knows quarantined, or
//     whose shard is down or unsafe, as it skips a standalone master.
//   - Batches of several names (acquire and release batches, renewals)
//     are cut per slot.
//   - While a slot migrates, Redis runs a script on the source only when
//     every key it declares is there (else ASK or TRYAGAIN: it did not
//     run). Scripts also read keys they do not declare (holder keys found
//     in the set): on the source, one already moved reads as absent. What
//     keeps an acquire safe there is that it declares keys that a grant
//     creates (the new holder's key, the queue keys), which the source
//     lacks, so it is answered TRYAGAIN until the slot has moved; a read
//     (WHO) may miss a moved holder, as a master that lost it would.
//   - The probe never plants a cluster's marker anew for settings (the
//     replant of scripts/lua/marker.lua, see Cluster.replant): a slot recording other
//     settings keeps refusing until the settings command writes it.
//
// Release messages go by SPUBLISH, to the shard of the channel's slot,
// where the agent subscribes (see its side of the watches, below).

// sharded is a master that is a Redis Cluster: the transport of this file.
type sharded struct{ *master }

func (m sharded) probe(runCtx context.Context) { m.probeShards(runCtx) }

func (m sharded) run(ctx context.Context, _ lane, c rueidis.Client, s *scripts.Script, keys, args []string) rueidis.RedisResult {
	r := m.shards.eval(ctx, c, s, keys, args)
	m.hear(r)
	return r
}

func (m sharded) runMulti(ctx context.Context, c rueidis.Client, s *scripts.Script, calls []call) []rueidis.RedisResult {
	return m.shards.evalMulti(ctx, c, s, calls)
}

// quarantined: a cluster master is quarantined per slot (see
// shardSet.noteReply).
func (m sharded) quarantined(time.Duration) {}

func (m sharded) horizon(ctx context.Context, l lane) rules.Horizon { return m.clusterHorizon(ctx, l) }

func (m sharded) markerReplies(ctx context.Context, s *scripts.Script, args []string) []rueidis.RedisResult {
	return m.everySlot(ctx, laneRounds, s, func(int) []string { return args })
}

// settingsMarker: every slot's records the same, but for a slot
// quarantined meanwhile.
func (m sharded) settingsMarker() string { return m.cluster.keys.SlotMarker(0) }

// voteErr: a quarantined slot's answer is left out of every round, as
// voters leaves out a standalone master (see slotVoteErr).
func (m sharded) voteErr(spec roundSpec) error {
	slot, _ := m.cluster.keys.CallSlot(spec.keys)
	return m.shards.slotErr(slot)
}

// publishOn publishes with SPUBLISH (see the watches below).
func (m sharded) publishOn(ctx context.Context, c rueidis.Client, channel, message string) {
	c.Do(ctx, c.B().Spublish().Channel(channel).Message(message).Build())
}

func (m sharded) subscribeLoop(ctx context.Context) { m.shards.subs.loop(ctx) }
func (m sharded) subscribe(ctx context.Context, ch string) bool {
	return m.shards.subs.subscribe(ctx, ch)
}
func (m sharded) unsubscribe(ctx context.Context, ch string) { m.shards.subs.unsubscribe(ctx, ch) }
func (m sharded) shardStatus() []ShardStatus                 { return m.shards.status() }
func (m sharded) perSlot() bool                              { return true }

// errNoSlot: a call on a cluster master named no key of a name or slot,
// only the generic marker (a programming error: see keyspace.Prefix.CallSlot).
var errNoSlot = errors.New("quorum: a call on a Redis Cluster master names no key of a slot")

// shardSet is a cluster master's view of its shards.
type shardSet struct {
	m *master

	mu    sync.RWMutex
	list  []*shard
	topo  string                // the slots as last read, to see them change
	owner [hashslot.Count]int16 // each slot's shard in list; -1 for none
	// until is, per slot, when its quarantine ends (Unix ns of the
	// cluster's clock); 0 for none known.
	until [hashslot.Count]int64

	// pending are the slots whose marker the next sweep reads: those of a
	// shard new or whose first marker changed, those that moved, those of
	// a shard where a call met a quarantined slot, and those a sweep did
	// not finish with (no answer, its deadline, tails to settle). Each is
	// 0, or the mark it was last made pending with (marks counts them), so
	// that a sweep takes off only the slots no one marked again meanwhile.
	pending [hashslot.Count]uint32
	marks   uint32
	// sweep asks the next probe to sweep although nothing changed; swept
	// is when one last did.
	sweep atomic.Bool
	swept time.Time
	// met is, per slot, when a round's call last named it (Unix ns of the
	// cluster's clock; 0 for never): a sweep reads first the slots of the
	// names this agent uses (see toSweep).
	met [hashslot.Count]atomic.Int64

	subs *shardSubs // the watches' subscriptions (see the watches, below)
}

// shard is one shard as the probe last saw it.
type shard struct {
	addr       string
	slots      []int // ascending
	state      State
	err        error
	epoch, run string // of its first slot's marker
	unsafe     error
	checked    bool // unsafe is this probe's verdict, not the last one's
	view       rules.MarkerView
	recorded   string
}

func newShardSet(m *master) *shardSet {
	s := &shardSet{m: m}
	s.subs = newShardSubs(m)
	for i := range s.owner {
		s.owner[i] = -1
	}
	return s
}

// withCluster makes opt a cluster client's, for a master that is a Redis
// Cluster.
func (m *master) withCluster(opt rueidis.ClientOption) rueidis.ClientOption {
	if len(m.cfg.Cluster) == 0 {
		return opt
	}
	opt.InitAddress = m.cfg.Cluster
	opt.ForceSingleClient = false
	opt.ClusterOption.ShardsRefreshInterval = time.Second
	return opt
}

// slotErr is why a call on slot may not vote, as the agent knows the slot:
// quarantined, or its shard down or unsafe; nil if it may.
func (s *shardSet) slotErr(slot int) error {
	if slot < 0 {
		return errNoSlot
	}
	now := s.m.cluster.clock.Now().UnixNano()
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.until[slot] > now {
		return ErrQuarantined
	}
	i := s.owner[slot]
	if i < 0 {
		return nil // not probed yet: the gate decides
	}
	sh := s.list[i]
	switch {
	case sh.unsafe != nil:
		return fmt.Errorf("shard %s: %w", sh.addr, sh.unsafe)
	case sh.state == StateDown:
		return fmt.Errorf("shard %s: %w", sh.addr, ErrMasterDown)
	}
	return nil
}

// slotVoteErr is, for a round that votes (not one that lands) on a master
// that is a Redis Cluster, why the slot of spec's keys may not answer it
// (see slotErr), nil if it may. A read's answer counts as a vote too: a
// quarantined slot's "no holder" is what it forgot, so it is left out of
// every such round, as voters leaves out a standalone master; a script
// that runs the gate is refused by eval anyway.
func (m *master) slotVoteErr(spec roundSpec) error {
	if spec.land {
		return nil
	}
	return m.t.voteErr(spec)
}

// quarantined notes that slot is quarantined for left more. A slot newly
// quarantined wakes every waiter (its holds are gone, so waiters may now
// win elsewhere), and asks the probe to sweep its shard's slots (the
// shard may have lost them all).
func (s *shardSet) quarantined(slot int, left time.Duration) {
	if s.noteQuarantine(slot, left) {
		s.mu.Lock()
		if i := s.owner[slot]; i >= 0 && int(i) < len(s.list) {
			s.markPending(s.list[i].slots)
		} else {
			s.markPending(nil)
		}
		s.mu.Unlock()
		s.sweep.Store(true)
		s.m.cluster.wakeAll()
	}
}

// markPending has the next sweep read slots, every slot if nil. s.mu is
// held.
func (s *shardSet) markPending(slots []int) {
	s.marks++
	if s.marks == 0 {
		s.marks++
	}
	if slots == nil {
		for slot := range s.pending {
			s.pending[slot] = s.marks
		}
		return
	}
	for _, slot := range slots {
		s.pending[slot] = s.marks
	}
}

// again has the next sweep read slots again (see markPending).
func (s *shardSet) again(slots []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.markPending(slots)
}

// toSweep are the pending slots that the sweep reads now, not those of a
// shard the probe last found down (see suspectSlots), in the order it reads
// them (see sweepOrder), and the marks of every slot as they are now (see
// done).
func (s *shardSet) toSweep() ([]int, *[hashslot.Count]uint32) {
	s.mu.RLock()
	var out []int
	for slot, p := range s.pending {
		if i := s.owner[slot]; p != 0 && (i < 0 || s.list[i].state != StateDown) {
			out = append(out, slot)
		}
	}
	marks := s.pending
	s.mu.RUnlock()
	var met [hashslot.Count]int64
	for _, slot := range out {
		met[slot] = s.met[slot].Load()
	}
	sweepOrder(out, &marks, &met)
	return out, &marks
}

// sweepOrder sorts the pending slots in the order a sweep reads them: first
// those a round's call met, the latest first (a held name's renewals, a
// waiter's tries), then those marked pending last first (a failover's
// slots before what is left of the agent's first sweep), then by slot. A
// sweep of thousands of slots on a loaded host can run out of its deadline
// long before the last: in slot order, the slot of a name in use waited
// behind every slot before it, sweep after sweep, and was not planted
// anew in the ten seconds after a failover that a user's LOCK on it then
// waits for.
func sweepOrder(slots []int, marks *[hashslot.Count]uint32, met *[hashslot.Count]int64) {
	slices.SortFunc(slots, func(a, b int) int {
		if c := cmp.Compare(met[b], met[a]); c != 0 {
			return c
		}
		if c := cmp.Compare(marks[b], marks[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
}

// meet notes that a round's call named slot at now (Unix ns: see met).
func (s *shardSet) meet(slot int, now int64) {
	if slot >= 0 {
		s.met[slot].Store(now)
	}
}

// done takes slots, which a sweep read and handled, off the pending ones,
// but for those marked again since the sweep took them (marks).
func (s *shardSet) done(slots []int, marks *[hashslot.Count]uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, slot := range slots {
		if s.pending[slot] == marks[slot] {
			s.pending[slot] = 0
		}
	}
}

// noteQuarantine records that slot is quarantined for left more, and says
// whether it was not known quarantined before.
func (s *shardSet) noteQuarantine(slot int, left time.Duration) (fresh bool) {
	until := s.m.cluster.clock.Now().Add(left).UnixNano()
	now := s.m.cluster.clock.Now().UnixNano()
	s.mu.Lock()
	defer s.mu.Unlock()
	fresh = s.until[slot] <= now
	s.until[slot] = max(s.until[slot], until)
	return fresh
}

// noteReply reads a gate's refusal {-2, ms} in r, a call's reply on slot.
func (s *shardSet) noteReply(slot int, r rueidis.RedisResult) {
	if slot < 0 {
		return
	}
	vals, err := r.ToArray()
	if err != nil || len(vals) != 2 {
		return
	}
	if code, err := vals[0].AsInt64(); err != nil || code != -2 {
		return
	}
	if ms, err := vals[1].AsInt64(); err == nil {
		s.quarantined(slot, time.Duration(ms)*time.Millisecond)
	}
}

// eval runs s on client c, a cluster master's connection: on the keys'
// slot, with its slot marker, the gate reading the run_id (see above).
func (sh *shardSet) eval(ctx context.Context, c rueidis.Client, s *scripts.Script, keys, args []string) rueidis.RedisResult {
	slot, keys := sh.m.cluster.keys.CallSlot(keys)
	if slot < 0 {
		return rueidis.NewErrorResult(errNoSlot)
	}
	sh.meet(slot, sh.m.cluster.clock.Now().UnixNano())
	if s.GateArg >= 0 {
		if err := sh.slotErr(slot); err != nil {
			return rueidis.NewErrorResult(err)
		}
	}
	s = s.Sharded
	r := c.Do(ctx, c.B().Evalsha().Sha1(s.SHA).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build())
	if noScript(r.Error()) {
		sh.m.reload.Store(true)
		r = c.Do(ctx, c.B().Eval().Script(s.Src).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build())
	}
	sh.noteReply(slot, r)
	return r
}

// evalMulti is eval of many calls, pipelined per shard.
func (sh *shardSet) evalMulti(ctx context.Context, c rueidis.Client, s *scripts.Script, calls []call) []rueidis.RedisResult {
	return sh.evalEach(ctx, c, s, calls, true)
}

// evalEach is evalMulti; the probe's calls, which find out whether a shard
// is down or a slot quarantined, do not check first (check false).
func (sh *shardSet) evalEach(ctx context.Context, c rueidis.Client, s *scripts.Script, calls []call, check bool) []rueidis.RedisResult {
	out := make([]rueidis.RedisResult, len(calls))
	slots := make([]int, len(calls))
	var cmds rueidis.Commands
	var sent []int
	var made []call // the calls as sent, for a NOSCRIPT's EVAL below
	v := s.Sharded
	now := sh.m.cluster.clock.Now().UnixNano() // see met
	for i, k := range calls {
		var keys []string
		slots[i], keys = sh.m.cluster.keys.CallSlot(k.keys)
		if slots[i] < 0 {
			out[i] = rueidis.NewErrorResult(errNoSlot)
			continue
		}
		if check {
			sh.meet(slots[i], now)
		}
		if check && s.GateArg >= 0 {
			if err := sh.slotErr(slots[i]); err != nil {
				out[i] = rueidis.NewErrorResult(err)
				continue
			}
		}
		args := sh.m.gateArgs(s, k.args)
		cmds = append(cmds, c.B().Evalsha().Sha1(v.SHA).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build())
		made = append(made, call{keys: keys, args: args})
		sent = append(sent, i)
	}
	if len(cmds) == 0 {
		return out
	}
	results := c.DoMulti(ctx, cmds...)
	if slices.ContainsFunc(results, func(r rueidis.RedisResult) bool { return noScript(r.Error()) }) {
		// A node that does not know the script (new, restarted, promoted:
		// each node has its own cache): load it on every node once, rather
		// than send its source with each of the calls again; and the
		// probe loads every script, with a deadline of its own.
		sh.m.reload.Store(true)
		sh.load(ctx, c, v)
		var redo rueidis.Commands
		var redone []int
		for j, r := range results {
			if noScript(r.Error()) { // a command is spent once sent: built anew
				k := made[j]
				redo = append(redo, c.B().Evalsha().Sha1(v.SHA).Numkeys(int64(len(k.keys))).Key(k.keys...).Arg(k.args...).Build())
				redone = append(redone, j)
			}
		}
		for n, r := range c.DoMulti(ctx, redo...) {
			if noScript(r.Error()) { // a node the client had not met
				k := made[redone[n]]
				r = c.Do(ctx, c.B().Eval().Script(v.Src).Numkeys(int64(len(k.keys))).Key(k.keys...).Arg(k.args...).Build())
			}
			results[redone[n]] = r
		}
	}
	for j, r := range results {
		out[sent[j]] = r
	}
	for i, r := range out {
		sh.noteReply(slots[i], r)
	}
	return out
}

// loadScripts puts every script a cluster master runs in the script cache
// of each of its nodes (primaries and replicas: each has its own cache), as
// standalone.loadScripts does on one server, with a deadline of its own.
// The probe does it after a connect and after a call met NOSCRIPT (a node
// new, restarted or promoted). Without it the nodes learnt a script only
// by the load that follows a NOSCRIPT inside the call that met it, within
// what was left of that call's deadline: the probe's gate met NOSCRIPT on
// every shard at first, and on a loaded host that answer alone could take
// most of the probe's budget, so the loads were never sent, and every next
// probe met NOSCRIPT again: the shards stayed down (timed out) as long as
// the host was that slow, though every node answered.
func (m sharded) loadScripts(runCtx context.Context) {
	c := m.conn(laneHealth)
	if c == nil {
		return
	}
	var srcs []string
	seen := map[*scripts.Script]bool{}
	for _, s := range scripts.All {
		if v := s.Sharded; !seen[v] {
			seen[v] = true
			srcs = append(srcs, v.Src)
		}
	}
	// A stop does not wait for a node that does not answer (see
	// standalone.loadScripts); the nodes are loaded side by side.
	ctx, cancel := context.WithTimeout(runCtx, max(20*m.cluster.cfg.MasterTimeout, time.Second))
	defer cancel()
	var wg sync.WaitGroup
	for addr, node := range c.Nodes() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmds := make(rueidis.Commands, len(srcs))
			for i, src := range srcs {
				cmds[i] = node.B().ScriptLoad().Script(src).Build()
			}
			for _, r := range node.DoMulti(ctx, cmds...) {
				if err := r.Error(); err != nil {
					m.log.Debug("script load failed on a node; a NOSCRIPT there loads them again", "node", addr, "error", err)
					return
				}
			}
		}()
	}
	unlessStopped(runCtx, func() struct{} { wg.Wait(); return struct{}{} }, func(struct{}) {})
}

// load puts s in the script cache of every node of the cluster client c.
func (sh *shardSet) load(ctx context.Context, c rueidis.Client, s *scripts.Script) {
	for addr, node := range c.Nodes() {
		if err := node.Do(ctx, node.B().ScriptLoad().Script(s.Src).Build()).Error(); err != nil {
			sh.m.log.Debug("script load failed on a node", "node", addr, "error", err)
		}
	}
}

// everySlot runs s once per slot on the lane l, with the slot's marker as
// its one key and args(slot) as its arguments, pipelined, and returns the
// replies by slot.
func (m *master) everySlot(ctx context.Context, l lane, s *scripts.Script, args func(slot int) []string) []rueidis.RedisResult {
	slots := make([]int, hashslot.Count)
	for i := range slots {
		slots[i] = i
	}
	return m.someSlots(ctx, l, s, slots, args)
}

// slotChunk is how many per-slot calls go in one batch (someSlots,
// suspectSlots), and how many slots a sweep reads and gates at a time
// (sweepSlots): a node that takes long over a huge batch (a loaded host)
// is taken for a dead connection by the client.
const slotChunk = 1024

// someSlots is everySlot for slots only; the replies are in their order,
// slotChunk at a time.
func (m *master) someSlots(ctx context.Context, l lane, s *scripts.Script, slots []int, args func(slot int) []string) []rueidis.RedisResult {
	c := m.conn(l)
	out := make([]rueidis.RedisResult, 0, len(slots))
	for lo := 0; lo < len(slots); lo += slotChunk {
		chunk := slots[lo:min(lo+slotChunk, len(slots))]
		calls := make([]call, len(chunk))
		for i, slot := range chunk {
			calls[i] = call{keys: []string{m.cluster.keys.SlotMarker(slot)}, args: args(slot)}
		}
		if c == nil || ctx.Err() != nil {
			for range chunk {
				out = append(out, rueidis.NewErrorResult(cmpOr(ctx.Err(), ErrNotConnected)))
			}
			continue
		}
		out = append(out, m.shards.evalEach(ctx, c, s, calls, false)...)
	}
	return out
}

// cmpOr is err, or else if it is nil.
func cmpOr(err, otherwise error) error {
	if err != nil {
		return err
	}
	return otherwise
}

// errNotCluster is why a cluster master whose seeds are a standalone
// redis-server does not vote.
var errNotCluster = errors.New("quorum: the seeds are not a Redis Cluster (cluster support disabled)")

// readTopology reads the cluster's shards (CLUSTER SLOTS): each primary's
// address and slots, in the order of their first slot, and the whole as a
// string that changes when a slot moves.
func (m *master) readTopology(ctx context.Context) ([]*shard, string, error) {
	c := m.conn(laneHealth)
	if c == nil {
		return nil, "", ErrNotConnected
	}
	ranges, err := c.Do(ctx, c.B().ClusterSlots().Build()).ToArray()
	if re, ok := rueidis.IsRedisErr(err); ok && strings.Contains(re.Error(), "cluster support disabled") {
		return nil, "", errNotCluster // else STATUS would say "master answered an error (This)"
	}
	if err != nil {
		return nil, "", err
	}
	byAddr := map[string]*shard{}
	var list []*shard
	for _, r := range ranges {
		addr, lo, hi, err := slotRange(r)
		if err != nil {
			return nil, "", err
		}
		sh := byAddr[addr]
		if sh == nil {
			sh = &shard{addr: addr}
			byAddr[addr] = sh
			list = append(list, sh)
		}
		for slot := lo; slot <= hi; slot++ {
			sh.slots = append(sh.slots, slot)
		}
	}
	var topo strings.Builder
	for _, sh := range list {
		slices.Sort(sh.slots)
	}
	slices.SortFunc(list, func(a, b *shard) int { return a.slots[0] - b.slots[0] })
	for _, sh := range list {
		fmt.Fprintf(&topo, "%s=%s;", sh.addr, hashslot.Ranges(sh.slots))
	}
	return list, topo.String(), nil
}

// slotRange reads one entry of CLUSTER SLOTS: [first, last, [ip, port, ...], replicas...].
// The address is written as the client names its nodes (Client.Nodes,
// net.JoinHostPort: an IPv6 one in brackets), so that checkShards finds
// the shard's primary there.
func slotRange(r rueidis.RedisMessage) (addr string, lo, hi int, err error) {
	e, err := r.ToArray()
	if err != nil || len(e) < 3 {
		return "", 0, 0, errors.New("unexpected CLUSTER SLOTS reply")
	}
	first, err1 := e[0].AsInt64()
	last, err2 := e[1].AsInt64()
	node, err3 := e[2].ToArray()
	if err := errors.Join(err1, err2, err3); err != nil || len(node) < 2 || first < 0 || last >= hashslot.Count || first > last {
		return "", 0, 0, errors.New("unexpected CLUSTER SLOTS reply")
	}
	ip, _ := node[0].ToString()
	port, err := node[1].AsInt64()
	if err != nil {
		return "", 0, 0, errors.New("unexpected CLUSTER SLOTS reply")
	}
	return net.JoinHostPort(ip, strconv.FormatInt(port, 10)), int(first), int(last), nil
}

// The probe of a master that is a Redis Cluster.

// sweepEvery bounds how often a call that met a quarantined slot makes the
// probe read every slot's marker.
const sweepEvery = time.Second

// probeShards is probe for a cluster master: it reads the slots, runs the
// gate on each shard's first slot, checks each shard's configuration now
// and then, reads every slot's marker when something changed, and sets the
// master's state from its shards'.
func (m *master) probeShards(runCtx context.Context) {
	cfg := &m.cluster.cfg
	// As generous as a standalone master's probe: four of the master's
	// timeouts, which follow its answers (a busy host is not an outage).
	ctx, cancel := context.WithTimeout(runCtx, max(4*cfg.MasterTimeout, 500*time.Millisecond, 4*m.timeout()))
	defer cancel()
	list, topo, err := m.readTopology(ctx)
	if err != nil {
		m.probeFailed(err)
		return
	}
	now := m.cluster.clock.Now()
	m.mu.Lock()
	m.failures = 0
	check := m.checked.IsZero() || now.Sub(m.checked) >= cfg.SafetyInterval
	m.mu.Unlock()
	m.gateShards(ctx, list)
	if m.reload.Swap(false) {
		m.loadScripts(runCtx)
	}
	if check {
		m.checkShards(ctx, list)
	}
	changed := m.shards.update(list, topo)
	m.noteShardMarkers(list)
	m.setState(m.shards.state())
	m.cluster.noteSettings()
	if changed || (m.shards.sweep.Load() && now.Sub(m.shards.swept) >= sweepEvery) {
		m.sweepSlots(runCtx)
	}
}

// update takes the probe's view of the shards, keeping each one's last
// configuration verdict unless it was checked again, marks pending the
// slots whose markers should be read (see sweepSlots) and says whether
// there are such: the slots that moved (their owner is another address,
// a failover's promoted replica among them), and those of a shard whose
// first marker is another than before (it lost its data, or is served by
// another server). The other shards' slots are not read again: a shard's
// first marker stands for its slots.
func (s *shardSet) update(list []*shard, topo string) (changed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := map[string]*shard{}
	var was [hashslot.Count]string // each slot's owner as last seen
	for _, sh := range s.list {
		old[sh.addr] = sh
	}
	// A slot no shard serves now must not keep its old place in the list,
	// which may be another shard's now.
	for slot := range s.owner {
		if i := s.owner[slot]; i >= 0 && int(i) < len(s.list) {
			was[slot] = s.list[i].addr
		}
		s.owner[slot] = -1
	}
	var moved []int
	for i, sh := range list {
		prev := old[sh.addr]
		all := prev == nil || sh.state != StateDown && (sh.epoch != prev.epoch || sh.run != prev.run)
		if prev != nil && !sh.checked {
			sh.unsafe = prev.unsafe
		}
		for _, slot := range sh.slots {
			s.owner[slot] = int16(i)
			if all || was[slot] != sh.addr {
				moved = append(moved, slot)
			}
		}
	}
	if len(moved) > 0 {
		s.markPending(moved)
	}
	s.list, s.topo = list, topo
	return len(moved) > 0
}

// sweepSlots reads the marker of every pending slot (see update), runs the
// probe's gate on those that may not vote as they are (planting where the
// agent may), notes each slot's quarantine, and settles the tails of the
// slots that lost their data. A slot it could not read (a shard busy or
// down, the sweep's deadline) or finish with stays pending, and makes the
// next probe sweep again: a sweep cut short by its deadline on a loaded
// host goes on where it stopped, rather than read every slot again from
// the first, only to be cut short again before it reached the last
// (after a failover, the promoted shard's slots were never planted anew).
func (m *master) sweepSlots(runCtx context.Context) {
	c := m.cluster
	ctx, cancel := context.WithTimeout(runCtx, max(100*c.cfg.MasterTimeout, 5*time.Second))
	defer cancel()
	m.shards.sweep.Store(false)
	m.shards.swept = c.clock.Now()
	slots, marks := m.shards.toSweep()
	// A chunk at a time, each read, gated and taken off the pending ones
	// before the next: the slots first in order (see sweepOrder) are done
	// with though the deadline cuts the sweep short.
	t := m.newSweepRun(marks)
	for lo := 0; lo < len(slots); lo += slotChunk {
		part := slots[lo:min(lo+slotChunk, len(slots))]
		if ctx.Err() != nil {
			t.failed += len(part)
			continue
		}
		m.sweepPart(ctx, part, t)
	}
	// Waiters are woken once, not per slot (a shard that restarted empty
	// has thousands), and a slot found quarantined asks for no other
	// sweep: this one read them all, or left them pending.
	if t.fresh {
		c.wakeAll()
	}
	if t.failed > 0 || t.unrecorded > 0 {
		// Read again at a next probe: a slot it could not read, or whose
		// marker this agent could not yet plant or record its settings in
		// (before it knew a majority records them), which an agent with
		// other settings must not be left to adopt first.
		m.shards.sweep.Store(true)
		m.log.Debug("sweeping again", "unread_slots", t.failed, "unrecorded_slots", t.unrecorded)
	}
	if len(t.lost) > 0 {
		// With a deadline of its own: the chunks may have spent the
		// sweep's, and a slot whose tails went unsettled is read again.
		settle, cancel := context.WithTimeout(runCtx, max(100*c.cfg.MasterTimeout, 5*time.Second))
		defer cancel()
		m.settleSlotTails(settle, t.lost)
	}
}

// sweepRun is one sweep: what it reads the slots by, taken once (the
// pending slots' marks, each slot's shard's run_id, the gate's arguments),
// and what it found: slots it could not read, slots it may not plant or
// record its settings in yet, slots that lost their data (their tails to
// settle), and whether a slot was newly found quarantined.
type sweepRun struct {
	marks *[hashslot.Count]uint32
	runs  []string
	args  []string

	failed, unrecorded int
	lost               []int
	fresh              bool
}

// newSweepRun is a sweep of the slots pending with marks.
func (m *master) newSweepRun(marks *[hashslot.Count]uint32) *sweepRun {
	return &sweepRun{marks: marks, runs: m.shards.runs(), args: m.cluster.gateArgs()}
}

// sweepPart is sweepSlots on slots, a chunk of the pending ones: it reads
// their markers, runs the probe's gate on those that may not vote as they
// are, notes each quarantine in t, and takes those it handled off the
// pending ones.
func (m *master) sweepPart(ctx context.Context, slots []int, t *sweepRun) {
	c := m.cluster
	suspect, read, failed := m.suspectSlots(ctx, slots, t.runs)
	t.failed += failed
	replies := m.someSlots(ctx, laneHealth, scripts.Marker, suspect, func(int) []string { return append(t.args[:2:2], "0") })
	for i, r := range replies {
		mk, err := readMarker(r, c.cfg.Settings)
		if err == nil && (errors.Is(mk.refusal, ErrUnplanted) || mk.recorded == "" && c.settings != "") {
			t.unrecorded++ // the agent may not plant or adopt yet (see Cluster.mayPlant)
			continue       // stays pending
		}
		switch {
		case err != nil:
			t.failed++
			continue // stays pending
		case mk.left > 0:
			t.fresh = m.shards.noteQuarantine(suspect[i], time.Duration(mk.left)*time.Millisecond) || t.fresh
			t.lost = append(t.lost, suspect[i])
		}
		read = append(read, suspect[i])
	}
	m.shards.done(read, t.marks)
}

// suspectSlots reads the marker of each of slots (HMGET, cheap beside the
// gate, which reads INFO) and returns the slots whose marker the gate must
// see: none, another server's run_id than its shard's first slot's, a
// quarantine not yet found over, tails pending, other settings; and those
// it read and found none of that in. failed counts the slots it could not
// read. slots are a chunk (slotChunk at most), read in one batch; runs is
// each slot's shard's run_id (shardSet.runs).
//
// slots leaves out the slots of the shards this probe found down: their calls
// would wait out the sweep's deadline (a shard that does not answer) or
// run the gate on every one of them (the probe did not learn the shard's
// run_id, so each slot looks served by another server), and the sweep runs
// inside the probe, which meanwhile probes none of the master's shards: a
// shard found down by one late answer (a cold connection on a loaded host)
// stayed down for that whole sweep, seconds, though it answered again at
// once. They are read when the shard is found up again: its first marker
// is then another than the down shard's none, so the probe sweeps (see
// update).
func (m *master) suspectSlots(ctx context.Context, slots []int, runs []string) (suspect, fine []int, failed int) {
	c := m.conn(laneHealth)
	if c == nil {
		return nil, nil, len(slots)
	}
	cmds := make(rueidis.Commands, 0, len(slots))
	for _, slot := range slots {
		cmds = append(cmds, c.B().Hmget().Key(m.cluster.keys.SlotMarker(slot)).Field("epoch", "run", "until", "tails", "settings").Build())
	}
	for i, r := range c.DoMulti(ctx, cmds...) {
		slot := slots[i]
		f, err := r.ToArray()
		if err != nil || len(f) != 5 {
			failed++
			continue
		}
		epoch, _ := f[0].ToString()
		run, _ := f[1].ToString()
		until, _ := f[2].ToString()
		tails, _ := f[3].ToString()
		settings, _ := f[4].ToString()
		if epoch == "" || run == "" || run != runs[slot] || (until != "0" && until != "") || tails == "pending" || settings != m.cluster.settings {
			suspect = append(suspect, slot)
		} else {
			fine = append(fine, slot)
		}
	}
	return suspect, fine, failed
}

// runs is, per slot, the run_id its shard's first slot's marker records,
// as the probe last saw it ("" where none).
func (s *shardSet) runs() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	runs := make([]string, hashslot.Count)
	for slot, i := range s.owner {
		if i >= 0 {
			runs[slot] = s.list[i].run
		}
	}
	return runs
}

// settleSlotTails is settleTails for a cluster master: each of the
// quarantined slots that lost its data sits out the tails the other
// masters keep.
func (m *master) settleSlotTails(ctx context.Context, quarantined []int) {
	c := m.cluster
	own := make([]rules.Horizon, hashslot.Count)
	for i, r := range m.someSlots(ctx, laneHealth, scripts.Horizon, quarantined, func(int) []string { return nil }) {
		own[quarantined[i]] = readHorizon(r)
	}
	var pending, unread []int
	for _, slot := range quarantined {
		switch h := own[slot]; {
		case !h.Answered:
			unread = append(unread, slot)
		case h.Lost && h.Epoch != "":
			pending = append(pending, slot)
		}
	}
	if len(unread) > 0 {
		// The sweep took them off the pending slots when it found them
		// quarantined; its deadline may have ended since (its last
		// chunks), and a slot left with tails=pending and its quarantine
		// not lengthened is read again at the next sweep, first of the
		// slots not met (marked last).
		m.shards.again(unread)
		m.shards.sweep.Store(true)
	}
	if len(pending) == 0 {
		return
	}
	left, settle, complete := rules.SettleHorizon(len(c.masters), c.otherHorizons(ctx, m.index))
	if !settle {
		m.shards.again(pending) // again at the next sweep
		m.shards.sweep.Store(true)
		return
	}
	ms := strconv.FormatInt((left + time.Duration(float64(left)*c.cfg.DriftFactor) + 10*time.Millisecond).Milliseconds(), 10)
	conn := m.conn(laneHealth)
	if conn == nil {
		return
	}
	calls := make([]call, len(pending))
	for i, slot := range pending {
		calls[i] = call{keys: []string{c.keys.SlotMarker(slot)}, args: []string{own[slot].Epoch, ms}}
	}
	for i, r := range m.shards.evalEach(ctx, conn, scripts.SettleTails, calls, false) {
		if q, err := r.AsInt64(); err == nil && q >= 0 {
			m.shards.quarantined(pending[i], time.Duration(q)*time.Millisecond)
		}
	}
	m.log.Info("slots that lost their data sit out the tails the others keep", "slots", len(pending), "complete", complete)
}

// slotHorizons asks every slot's marker for its tail horizon.
func (m *master) slotHorizons(ctx context.Context, l lane) []rules.Horizon {
	out := make([]rules.Horizon, hashslot.Count)
	for slot, r := range m.everySlot(ctx, l, scripts.Horizon, func(int) []string { return nil }) {
		out[slot] = readHorizon(r)
	}
	return out
}

// clusterHorizon is a cluster master's tail horizon as another master's
// settling asks it: the latest of its slots', lost if any slot lost its
// data and is not settled.
func (m *master) clusterHorizon(ctx context.Context, l lane) rules.Horizon {
	all := rules.Horizon{Answered: true}
	for _, h := range m.slotHorizons(ctx, l) {
		if !h.Answered {
			return rules.Horizon{}
		}
		all.Lost = all.Lost || h.Lost
		all.Left = max(all.Left, h.Left)
	}
	return all
}

// checkShards checks each shard primary's configuration (see checkSafety).
func (m *master) checkShards(ctx context.Context, list []*shard) {
	c := m.conn(laneHealth)
	if c == nil {
		return
	}
	nodes := c.Nodes()
	all := true
	for _, sh := range list {
		node, ok := nodes[sh.addr]
		if !ok {
			all = false
			continue
		}
		unsafe, ok := m.checkSafetyOn(ctx, node)
		if !ok {
			all = false
			continue
		}
		sh.unsafe, sh.checked = unsafe, true
	}
	if all {
		m.mu.Lock()
		m.checked = m.cluster.clock.Now()
		m.mu.Unlock()
	}
}

// noteShardMarkers sets the master's marker view from its shards' first
// markers: ours when every shard's records this agent's settings, other
// when one records others.
func (m *master) noteShardMarkers(list []*shard) {
	view, recorded := rules.ViewOurs, ""
	var refusal error
	for _, sh := range list {
		switch {
		case sh.view == rules.ViewOther:
			view, refusal, recorded = rules.ViewOther, sh.err, sh.recorded
		case sh.view == rules.ViewNone && view == rules.ViewOurs:
			view, recorded = rules.ViewNone, sh.recorded
		case recorded == "":
			recorded = sh.recorded
		}
	}
	if len(list) == 0 {
		view = rules.ViewNone
	}
	m.view.Store(int32(view))
	m.mu.Lock()
	m.refusal, m.recorded = refusal, recorded
	m.mu.Unlock()
}

// state is the master's state from its shards' (see clusterState). A shard
// down, unsafe or quarantined keeps its own slots from voting (see
// slotErr); one that records other settings keeps the whole master from
// voting (see noteShardMarkers: the master's refusal), as a standalone
// master that records them does. Each shard's state shows in its status.
func (s *shardSet) state() (State, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if len(s.list) == 0 {
		return StateDown, errors.New("the cluster serves no slot")
	}
	states := make([]State, len(s.list))
	errs := make([]error, len(s.list))
	for i, sh := range s.list {
		states[i], errs[i] = sh.state, sh.err
		if sh.unsafe != nil {
			states[i], errs[i] = StateUnsafe, sh.unsafe
		}
	}
	st, i := clusterState(states)
	if st == StateUp {
		return st, nil
	}
	return st, errs[i]
}

// clusterState is a cluster master's state from its shards' states, and
// the index of a shard in that state: up when one shard is up or
// quarantined (its slots vote, or sit out their quarantine each: see
// slotErr and the shard's status), else the state most of them are in,
// the first of down, unsafe, settings on a tie. A master that can vote on
// no slot must not show as up (STATUS, the masters up, the rounds' voters):
// one whose shards recorded other settings, or did not answer, was up
// unless they all were in one state.
func clusterState(states []State) (State, int) {
	counts := map[State]int{}
	for _, st := range states {
		counts[st]++
	}
	if counts[StateUp]+counts[StateQuarantined] > 0 {
		return StateUp, 0
	}
	best := StateDown
	for _, st := range []State{StateUnsafe, StateSettings} {
		if counts[st] > counts[best] {
			best = st
		}
	}
	return best, max(0, slices.Index(states, best))
}

// status is each shard's ShardStatus.
func (s *shardSet) status() []ShardStatus {
	now := s.m.cluster.clock.Now()
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]ShardStatus, len(s.list))
	for i, sh := range s.list {
		st := ShardStatus{Address: sh.addr, Slots: hashslot.Ranges(sh.slots), State: sh.state}
		if sh.unsafe != nil {
			st.State = StateUnsafe
			st.Err = describe(sh.unsafe)
		} else if sh.err != nil {
			st.Err = describe(sh.err)
		}
		var last int64
		for _, slot := range sh.slots {
			if u := s.until[slot]; u > now.UnixNano() {
				st.QuarantinedSlots++
				last = max(last, u)
			}
		}
		if st.QuarantinedSlots > 0 {
			st.QuarantineLeft = time.Duration(last - now.UnixNano())
			if st.State == StateUp {
				st.State = StateQuarantined
			}
		}
		out[i] = st
	}
	return out
}

// A cluster master's side of the watches. A Redis Cluster
// delivers a PUBLISH on every node, over the cluster bus: a cost on every
// node at every release. So on such a master the scripts publish with
// SPUBLISH (scripts.Script.Sharded), which reaches only the subscribers on the
// shard that serves the channel's slot, and the master keeps one pub/sub
// connection per shard primary, subscribed (SSUBSCRIBE) to the watched
// channels of that shard's slots. A channel must follow its slot: when the
// probe sees the slots move, or a server drops a channel (it does when the
// slot leaves it), the channel is subscribed again at its slot's owner, and
// its watches look again (Recheck): what was published meanwhile is lost.

// shardSubs is a cluster master's shard subscriptions.
type shardSubs struct {
	m *master
	// mu is held across a subscription's round trip, as master.subMu is,
	// and guards conns and placed.
	mu    sync.Mutex
	conns map[string]*shardConn // by the primary's address
	// placed is the probe's topology (shardSet.topo) the channels were
	// last placed by.
	placed  string
	stopped bool // the master stops: no new connection
	// dirty asks the loop to place the channels again although the
	// topology did not change: a connection ended, a subscription failed,
	// a server dropped a channel, or a channel's slot had no known owner.
	// A failure of the loop's own waits for its next turn (a probe
	// interval), so that a shard that is down is not dialled in a spin;
	// what a connection reports wakes it at once (kick).
	dirty atomic.Bool
	kick  chan struct{}
	// leaving is the channels whose unsubscription waits for mu (see
	// unsubscribe).
	leaving leaving
}

// shardConn is one dedicated pub/sub connection to a shard primary.
type shardConn struct {
	addr  string
	dc    rueidis.DedicatedClient
	chans map[string]struct{} // subscribed and confirmed; guarded by shardSubs.mu
	ended atomic.Bool
	// closing says the agent closed it: its end is no news to report.
	closing atomic.Bool

	// dropped are the channels the server unsubscribed on its own (their
	// slot moved), and ours counts the SUNSUBSCRIBEs sent whose answer
	// (the same push) is yet to come: a stale one would drop the channel
	// subscribed again since. Guarded by dropMu, not shardSubs.mu: the
	// connection's hook writes them, and must not wait.
	dropMu  sync.Mutex
	dropped []string
	ours    map[string]int
}

func newShardSubs(m *master) *shardSubs {
	return &shardSubs{m: m, conns: map[string]*shardConn{}, kick: make(chan struct{}, 1)}
}

// loop places the watched channels on the shards until ctx ends: at once
// when a connection says something changed, else at each probe interval
// if the probe saw the slots move.
func (s *shardSubs) loop(ctx context.Context) {
	select {
	case <-s.m.connected:
	case <-ctx.Done():
		return
	}
	defer s.closeAll()
	for ctx.Err() == nil {
		s.place(ctx)
		// Paced with the probe, in real time as the probe is: not lease logic.
		t := time.NewTimer(s.m.cluster.cfg.ProbeInterval)
		select {
		case <-ctx.Done():
		case <-t.C:
		case <-s.kick:
		}
		t.Stop()
	}
}

// again asks the loop to place the channels again, at once.
func (s *shardSubs) again() {
	s.dirty.Store(true)
	signal(s.kick)
}

// close closes sc on the agent's behalf.
func (sc *shardConn) close() {
	sc.closing.Store(true)
	sc.dc.Close()
}

// place subscribes each watched channel at its slot's owner, moving those
// whose slot moved, and confirms each one it subscribed (its watches look
// again).
func (s *shardSubs) place(ctx context.Context) {
	topo, dirty := s.m.shards.topology(), s.dirty.Swap(false)
	if topo == "" || (topo == s.placed && !dirty) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.placed = topo
	s.forgetDropped()
	carried := s.unplaceMoved(ctx)
	for _, ch := range s.m.cluster.watchedChannels() {
		if _, ok := carried[ch]; ok {
			continue
		}
		if s.subscribeLocked(ctx, ch) {
			s.m.cluster.confirm(ch)
		}
	}
}

// forgetDropped closes the connections that ended and takes from the
// others the channels their server dropped.
func (s *shardSubs) forgetDropped() {
	for addr, sc := range s.conns {
		if sc.ended.Load() {
			sc.close()
			delete(s.conns, addr)
			continue
		}
		sc.dropMu.Lock()
		for _, ch := range sc.dropped {
			delete(sc.chans, ch)
		}
		sc.dropped = nil
		sc.dropMu.Unlock()
	}
}

// unplaceMoved unsubscribes, on each connection, the channels whose slot
// another shard now serves or that no one watches any more, and returns
// the channels left where they belong.
func (s *shardSubs) unplaceMoved(ctx context.Context) map[string]struct{} {
	carried := map[string]struct{}{}
	for _, sc := range s.conns {
		var moved []string
		for ch := range sc.chans {
			if s.m.shards.ownerOf(hashslot.Of(ch)) == sc.addr && s.m.cluster.watched(ch) {
				carried[ch] = struct{}{}
				continue
			}
			moved = append(moved, ch)
		}
		s.sunsubscribe(ctx, sc, moved)
	}
	return carried
}

// subscribe adds one channel at its slot's owner and says whether it was
// confirmed; if not, the loop places it later and confirms it then.
func (s *shardSubs) subscribe(ctx context.Context, ch string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.m.cluster.watched(ch) {
		return false
	}
	return s.subscribeLocked(ctx, ch)
}

func (s *shardSubs) subscribeLocked(ctx context.Context, ch string) bool {
	addr := s.m.shards.ownerOf(hashslot.Of(ch))
	sc := s.open(addr)
	if sc == nil {
		s.dirty.Store(true) // the slot's owner is not known or not reached yet
		return false
	}
	if _, ok := sc.chans[ch]; ok {
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, 4*s.m.cluster.cfg.MasterTimeout)
	defer cancel()
	if err := sc.dc.Do(ctx, sc.dc.B().Ssubscribe().Channel(ch).Build()).Error(); err != nil {
		s.m.log.Debug("shard subscribe failed: placing it again", "shard", addr, "channel", ch, "error", err)
		s.failed(sc, err)
		return false
	}
	sc.chans[ch] = struct{}{}
	return true
}

// unsubscribe drops a channel that no watcher wants any more. As on a
// standalone master (see standalone.unsubscribe), the unsubscriptions of
// many names closed at once wait for each other here, and the first to get
// its turn sends every one waiting, one SUNSUBSCRIBE per channel (a
// channel's slot is its own: one command for many would be CROSSSLOT),
// pipelined in one round trip per shard. One at a time, 2000 watches closed
// at once on a loaded host were still unsubscribing 30 seconds later
// (TestShardWatchWakesBySSubscribe's "601 shard channels still subscribed",
// in a soak run).
func (s *shardSubs) unsubscribe(ctx context.Context, ch string) {
	s.leaving.add(ch)
	s.mu.Lock()
	defer s.mu.Unlock()
	leaving := s.leaving.take(s.m.cluster.watched)
	for _, sc := range s.conns {
		var drop []string
		for _, ch := range leaving {
			if _, ok := sc.chans[ch]; ok {
				drop = append(drop, ch)
			}
		}
		s.sunsubscribe(ctx, sc, drop)
	}
}

// sunsubscribe drops chans from sc, in one round trip. Its deadline counts
// from its turn (see master.unsubscribe).
func (s *shardSubs) sunsubscribe(ctx context.Context, sc *shardConn, chans []string) {
	if len(chans) == 0 {
		return
	}
	cmds := make(rueidis.Commands, 0, len(chans))
	sc.dropMu.Lock()
	for _, ch := range chans {
		delete(sc.chans, ch)
		sc.ours[ch]++
		cmds = append(cmds, sc.dc.B().Sunsubscribe().Channel(ch).Build())
	}
	sc.dropMu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 4*s.m.cluster.cfg.MasterTimeout)
	defer cancel()
	for _, r := range sc.dc.DoMulti(ctx, cmds...) {
		if err := r.Error(); err != nil {
			s.m.log.Debug("shard unsubscribe failed", "shard", sc.addr, "channels", len(chans), "error", err)
			s.failed(sc, err)
			return
		}
	}
}

// failed handles a subscription's error on sc: a server's refusal (MOVED:
// the probe has not seen the slot move yet) is tried again by the loop;
// any other error may leave the connection in an unknown state, so it is
// made anew with the channels watched.
func (s *shardSubs) failed(sc *shardConn, err error) {
	if _, refused := rueidis.IsRedisErr(err); !refused {
		sc.close()
		delete(s.conns, sc.addr)
	}
	s.dirty.Store(true)
}

// open returns the live connection to the primary at addr, making it if
// need be; nil if addr is "" or the client does not know the node yet.
func (s *shardSubs) open(addr string) *shardConn {
	if sc := s.conns[addr]; sc != nil && !sc.ended.Load() {
		return sc
	}
	c := s.m.getClient()
	if addr == "" || c == nil || s.stopped {
		return nil
	}
	node, ok := c.Nodes()[addr]
	if !ok {
		return nil
	}
	dc, _ := node.Dedicate()
	sc := &shardConn{addr: addr, dc: dc, chans: map[string]struct{}{}, ours: map[string]int{}}
	wait := dc.SetPubSubHooks(rueidis.PubSubHooks{
		OnMessage:      func(msg rueidis.PubSubMessage) { s.m.cluster.onMessage(msg.Channel, msg.Message) },
		OnSubscription: func(sub rueidis.PubSubSubscription) { s.onSubscription(sc, sub) },
	})
	go func() {
		err := <-wait
		sc.ended.Store(true)
		if !sc.closing.Load() {
			s.m.log.Debug("shard subscriber ended", "shard", addr, "error", err)
			s.again()
		}
	}()
	s.conns[addr] = sc
	return sc
}

// onSubscription notes a channel the server unsubscribed sc from on its
// own.
func (s *shardSubs) onSubscription(sc *shardConn, sub rueidis.PubSubSubscription) {
	if sub.Kind != "sunsubscribe" {
		return
	}
	sc.dropMu.Lock()
	defer sc.dropMu.Unlock()
	if sc.ours[sub.Channel] > 0 {
		if sc.ours[sub.Channel]--; sc.ours[sub.Channel] == 0 {
			delete(sc.ours, sub.Channel)
		}
		return
	}
	sc.dropped = append(sc.dropped, sub.Channel)
	s.again()
}

// closeAll closes every connection as the master stops. Closing one may
// wait up to a second for a paused server: not in the stop's way.
func (s *shardSubs) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	for addr, sc := range s.conns {
		sc.closing.Store(true)
		go sc.dc.Close()
		delete(s.conns, addr)
	}
}

// ownerOf is the address of the primary that serves slot as the probe last
// saw it; "" if none is known.
func (s *shardSet) ownerOf(slot int) string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if i := s.owner[slot]; i >= 0 && int(i) < len(s.list) {
		return s.list[i].addr
	}
	return ""
}

// topology is the slots as the probe last read them ("" before).
func (s *shardSet) topology() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.topo
}

// publish publishes message on channel on m from outside a script: SPUBLISH
// on a cluster master (see above), PUBLISH on a standalone one.
func (m *master) publish(ctx context.Context, channel, message string) {
	if c := m.conn(laneRounds); c != nil {
		m.t.publishOn(ctx, c, channel, message)
	}
}
