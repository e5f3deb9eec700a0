package quorum

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/lock-agent/lock-agent/quorum/hashslot"
	"github.com/lock-agent/lock-agent/quorum/rules"
	"github.com/lock-agent/lock-agent/quorum/scripts"
	"github.com/redis/rueidis"
)

// The probe of a master that is a Redis Cluster (see shards.go).

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
// configuration verdict unless it was checked again, and says
// whether every slot's marker should be read: the slots moved, or a
// shard's first marker is another than before (it lost its data, or is
// served by another server).
func (s *shardSet) update(list []*shard, topo string) (changed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	changed = topo != s.topo
	old := map[string]*shard{}
	for _, sh := range s.list {
		old[sh.addr] = sh
	}
	// A slot no shard serves now must not keep its old place in the list,
	// which may be another shard's now.
	for slot := range s.owner {
		s.owner[slot] = -1
	}
	for i, sh := range list {
		was := old[sh.addr]
		switch {
		case was == nil:
			changed = true
		case sh.state != StateDown && (sh.epoch != was.epoch || sh.run != was.run):
			changed = true
		}
		if was != nil && !sh.checked {
			sh.unsafe = was.unsafe
		}
		for _, slot := range sh.slots {
			s.owner[slot] = int16(i)
		}
	}
	s.list, s.topo = list, topo
	return changed
}

// sweepSlots reads every slot's marker, runs the probe's gate on those that
// may not vote as they are (planting where the agent may), notes each
// slot's quarantine, and settles the tails of the slots that lost their
// data. A slot it could not read (a shard busy or down) makes the next
// probe sweep again.
func (m *master) sweepSlots(runCtx context.Context) {
	c := m.cluster
	ctx, cancel := context.WithTimeout(runCtx, max(100*c.cfg.MasterTimeout, 5*time.Second))
	defer cancel()
	m.shards.sweep.Store(false)
	m.shards.swept = c.clock.Now()
	suspect, failed := m.suspectSlots(ctx)
	args := c.gateArgs()
	replies := m.someSlots(ctx, laneHealth, scripts.Marker, suspect, func(int) []string { return append(args[:2:2], "0") })
	var lost []int
	fresh, unrecorded := false, 0
	for i, r := range replies {
		mk, err := readMarker(r, c.cfg.Settings)
		if err == nil && (errors.Is(mk.refusal, ErrUnplanted) || mk.recorded == "" && c.settings != "") {
			unrecorded++ // the agent may not plant or adopt yet (see Cluster.mayPlant)
		}
		switch {
		case err != nil:
			failed++
		case mk.left > 0:
			fresh = m.shards.noteQuarantine(suspect[i], time.Duration(mk.left)*time.Millisecond) || fresh
			lost = append(lost, suspect[i])
		}
	}
	// Waiters are woken once, not per slot (a shard that restarted empty
	// has thousands), and a slot found quarantined asks for no other
	// sweep: this one read them all.
	if fresh {
		c.wakeAll()
	}
	if failed > 0 || unrecorded > 0 {
		// Read again at a next probe: a slot it could not read, or whose
		// marker this agent could not yet plant or record its settings in
		// (before it knew a majority records them), which an agent with
		// other settings must not be left to adopt first.
		m.shards.sweep.Store(true)
		m.log.Debug("sweeping again", "unread_slots", failed, "unrecorded_slots", unrecorded)
	}
	if len(lost) > 0 {
		m.settleSlotTails(ctx, lost)
	}
}

// suspectSlots reads every slot's marker (HMGET, cheap beside the gate,
// which reads INFO) and returns the slots whose marker the gate must see:
// none, another server's run_id than its shard's first slot's, a
// quarantine not yet found over, tails pending, other settings. failed
// counts the slots it could not read.
//
// It leaves out the slots of the shards this probe found down: their calls
// would wait out the sweep's deadline (a shard that does not answer) or
// run the gate on every one of them (the probe did not learn the shard's
// run_id, so each slot looks served by another server), and the sweep runs
// inside the probe, which meanwhile probes none of the master's shards: a
// shard found down by one late answer (a cold connection on a loaded host)
// stayed down for that whole sweep, seconds, though it answered again at
// once. They are read when the shard is found up again: its first marker
// is then another than the down shard's none, so the probe sweeps (see
// update).
func (m *master) suspectSlots(ctx context.Context) (suspect []int, failed int) {
	const chunk = 1024
	c := m.conn(laneHealth)
	if c == nil {
		return nil, hashslot.Count
	}
	runs, down := m.shards.runs()
	slots := make([]int, 0, hashslot.Count)
	for slot := range hashslot.Count {
		if !down[slot] {
			slots = append(slots, slot)
		}
	}
	for lo := 0; lo < len(slots); lo += chunk {
		part := slots[lo:min(lo+chunk, len(slots))]
		cmds := make(rueidis.Commands, 0, len(part))
		for _, slot := range part {
			cmds = append(cmds, c.B().Hmget().Key(m.cluster.keys.SlotMarker(slot)).Field("epoch", "run", "until", "tails", "settings").Build())
		}
		for i, r := range c.DoMulti(ctx, cmds...) {
			slot := part[i]
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
			}
		}
	}
	return suspect, failed
}

// runs is, per slot, the run_id its shard's first slot's marker records,
// as the probe last saw it ("" where none), and whether the probe last
// found its shard down.
func (s *shardSet) runs() (runs []string, down []bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	runs, down = make([]string, hashslot.Count), make([]bool, hashslot.Count)
	for slot, i := range s.owner {
		if i >= 0 {
			runs[slot], down[slot] = s.list[i].run, s.list[i].state == StateDown
		}
	}
	return runs, down
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
	var pending []int
	for _, slot := range quarantined {
		if h := own[slot]; h.Answered && h.Lost && h.Epoch != "" {
			pending = append(pending, slot)
		}
	}
	if len(pending) == 0 {
		return
	}
	left, settle, complete := rules.SettleHorizon(len(c.masters), c.otherHorizons(ctx, m.index))
	if !settle {
		m.shards.sweep.Store(true) // again at the next sweep
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

// state is the master's state from its shards': down when all are, else
// unsafe or recording other settings when all are, else up. A shard down,
// unsafe or quarantined keeps its own slots from voting (see slotErr); one
// that records other settings keeps the whole master from voting (see
// noteShardMarkers: the master's refusal), as a standalone master that
// records them does. Each shard's state shows in its status.
func (s *shardSet) state() (State, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if len(s.list) == 0 {
		return StateDown, errors.New("the cluster serves no slot")
	}
	counts := map[State]int{}
	var errs []error
	for _, sh := range s.list {
		st := sh.state
		if sh.unsafe != nil {
			st = StateUnsafe
			errs = append(errs, sh.unsafe)
		} else if sh.err != nil {
			errs = append(errs, sh.err)
		}
		counts[st]++
	}
	for _, st := range []State{StateDown, StateUnsafe, StateSettings} {
		if counts[st] == len(s.list) {
			return st, errs[0]
		}
	}
	return StateUp, nil
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
