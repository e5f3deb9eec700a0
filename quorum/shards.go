package quorum

import (
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
//     every slot's marker once (sweep), planting where the agent may, and
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
// where the agent subscribes (see shardwatch.go).

// errNoSlot: a call on a cluster master named no key of a name or slot,
// only the generic marker (a programming error: see callSlot).
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

	// sweep asks the next probe to read every slot's marker; swept is when
	// one last did.
	sweep atomic.Bool
	swept time.Time

	subs *shardSubs // the watches' subscriptions (see shardwatch.go)
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
// win elsewhere), and asks the probe for a sweep.
func (s *shardSet) quarantined(slot int, left time.Duration) {
	if s.noteQuarantine(slot, left) {
		s.sweep.Store(true)
		s.m.cluster.wakeAll()
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
	for i, k := range calls {
		var keys []string
		slots[i], keys = sh.m.cluster.keys.CallSlot(k.keys)
		if slots[i] < 0 {
			out[i] = rueidis.NewErrorResult(errNoSlot)
			continue
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

// someSlots is everySlot for slots only; the replies are in their order.
// They go slotChunk at a time: a node that takes long over a huge batch
// (a loaded host) is taken for a dead connection by the client.
func (m *master) someSlots(ctx context.Context, l lane, s *scripts.Script, slots []int, args func(slot int) []string) []rueidis.RedisResult {
	const slotChunk = 1024
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
