package quorum

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/lock-agent/lock-agent/quorum/rules"
	"github.com/lock-agent/lock-agent/quorum/scripts"
	"github.com/redis/rueidis"
)

// The epoch gate, the agent's side. Every script that votes runs the gate
// first (scripts/lua/gate.lua, where the rule is written): it refuses the vote of
// a master that lost its data until a quarantine has passed, or of one
// whose marker records other settings. This file holds all that the agent
// does about it: the arguments each voting call carries (its epoch, the
// run_id this agent verified, the quarantine, whether it may plant), the
// decision to plant or re-plant a marker from what the probes saw, the
// probe's gate and how its reply and refusals are read, and how long a
// quarantine lasts: the tail horizon, at the end.

// gateArgs are the gate's two arguments (see scripts/lua/gate.lua): an epoch to plant on
// a master that has none (each master's call appends the run_id it
// verified: see master.gateArgs), and the gate argument (see gateArg), with
// whether this agent may plant as its probes decide it (see mayPlant).
func (c *Cluster) gateArgs() []string {
	return []string{c.cfg.InstanceID + ":" + strconv.FormatUint(c.epochs.Add(1), 10), c.gateArg(c.mayPlant())}
}

// gateArg is the gate argument "QUARANTINE_MS MAY_PLANT SETTINGS": the
// quarantine to give a master found empty, whether this agent may plant or
// adopt a marker, and the settings the marker must record.
func (c *Cluster) gateArg(mayPlant bool) string {
	plant := "0"
	if mayPlant {
		plant = "1"
	}
	return strconv.FormatInt(c.cfg.Quarantine.Milliseconds(), 10) + " " + plant + " " + c.settings
}

// gateArgs are args with, for a script that runs the gate, the run_id this
// master was verified with appended to the epoch argument (see
// scripts.Script.GateArg), and the quarantine in the gate argument after it
// lengthened by the master's failover margin (see lengthenQuarantine).
func (m *master) gateArgs(s *scripts.Script, args []string) []string {
	if s.GateArg < 0 || s.GateArg >= len(args) {
		return args
	}
	run := ""
	if p := m.runID.Load(); p != nil {
		run = *p
	}
	out := make([]string, len(args))
	copy(out, args)
	out[s.GateArg] += ";" + run
	if s.GateArg+1 < len(out) {
		out[s.GateArg+1] = m.lengthenQuarantine(out[s.GateArg+1])
	}
	return out
}

// lengthenQuarantine adds the master's failover margin to the quarantine
// of a gate argument ("QUARANTINE_MS MAY_PLANT SETTINGS", see
// Cluster.gateArg), so that every agent plants the same longer one.
func (m *master) lengthenQuarantine(gateArg string) string {
	margin := m.cfg.failoverMargin()
	ms, rest, ok := strings.Cut(gateArg, " ")
	q, err := strconv.ParseInt(ms, 10, 64)
	if margin == 0 || !ok || err != nil {
		return gateArg
	}
	return strconv.FormatInt(q+margin.Milliseconds(), 10) + " " + rest
}

// markerCounts are MarkerCounts of what this agent's probes last saw of
// each master's marker. Read without a lock on every gate call.
func (c *Cluster) markerCounts() (ours, others, probed int) {
	var room [8]rules.MarkerView // no allocation for a cluster of up to 8 masters
	views := room[:0]
	for _, m := range c.masters {
		views = append(views, rules.MarkerView(m.view.Load()))
	}
	return rules.MarkerCounts(views)
}

// mayPlant says whether this agent may plant a marker on a master that has
// none (see MayPlant), as its probes last saw the markers.
func (c *Cluster) mayPlant() bool {
	ours, others, probed := c.markerCounts()
	return rules.MayPlant(ours, others, probed, c.quorum)
}

// replant says whether this agent's probe plants anew a marker recording
// other settings (see Replant), as its probes last saw the markers.
func (c *Cluster) replant() bool {
	ours, _, _ := c.markerCounts()
	return rules.Replant(ours, c.quorum)
}

// gate runs the epoch gate on the probe's connection and returns what it
// found.
func (m *master) gate(ctx context.Context) (markerReply, error) {
	// The probe's connection serves one call at a time, which the client
	// library runs to the call's deadline whatever the context says: the
	// probe stops waiting when the cluster stops, and the call ends when
	// Run closes the connection.
	c := m.cluster
	args := c.gateArgs()
	replant := "0"
	if c.replant() {
		replant = "1"
	}
	answer := make(chan rueidis.RedisResult, 1)
	go func() {
		answer <- m.evalOn(ctx, laneHealth, scripts.Marker.Fallback(), []string{c.keys.Marker()}, append(args, replant))
	}()
	var r rueidis.RedisResult
	select {
	case r = <-answer:
	case <-ctx.Done():
		r = rueidis.NewErrorResult(ctx.Err())
	}
	mk, err := readMarker(r, c.cfg.Settings)
	if err == nil || mk.run != "" {
		m.runID.Store(&mk.run)
	}
	return mk, err
}

// readMarker reads a scripts/lua/marker.lua reply.
func readMarker(r rueidis.RedisResult, ours Settings) (markerReply, error) {
	vals, err := r.ToArray()
	if err != nil {
		return markerReply{}, err
	}
	if len(vals) != 6 {
		return markerReply{}, errors.New("unexpected probe reply")
	}
	var mk markerReply
	mk.epoch, _ = vals[0].ToString()
	mk.left, err = vals[1].AsInt64()
	mk.run, _ = vals[2].ToString()
	mk.recorded, _ = vals[3].ToString()
	refusal, _ := vals[4].ToString()
	mk.how, _ = vals[5].ToString()
	return mk, mk.readRefusal(refusal, ours, err)
}

// markerReply is what the probe's gate found (see scripts/lua/marker.lua).
type markerReply struct {
	epoch, run, recorded string
	how                  string // how the marker came to be (see scripts/lua/marker.lua)
	left                 int64  // ms of quarantine left
	// refusal is the gate's refusal: a *SettingsError, ErrUnplanted, or nil.
	refusal error
	// replanted is, when the probe planted the marker anew, the settings
	// it recorded before.
	replanted *string
}

// readRefusal reads the probe's refusal word (see scripts/lua/marker.lua) into mk, and
// returns the probe's error: err, or a refusal that is a master's error.
func (mk *markerReply) readRefusal(refusal string, ours Settings, err error) error {
	word, rest, _ := strings.Cut(refusal, " ")
	switch {
	case err != nil:
		return err
	case refusal == "":
	case word == "REPLANTED":
		mk.replanted = &rest
	default:
		if mk.refusal = gateWord(refusal, ours); mk.refusal == nil {
			return errors.New(refusal)
		}
	}
	return nil
}

// gateRefusal turns a gate's refusal (an error reply the gate raises: see
// scripts/lua/gate.lua) into our error: a *SettingsError, ErrUnplanted, or err as it
// was. Redis may add words after the gate's ("script: ..."), so only the
// first two words are read.
func gateRefusal(err error, ours Settings) error {
	if re, ok := rueidis.IsRedisErr(err); ok {
		if refusal := gateWord(re.Error(), ours); refusal != nil {
			return refusal
		}
	}
	return err
}

// gateWord reads the gate's refusal (see scripts/lua/gate.lua) from its text:
// "SETTINGS <recorded>" or "UNPLANTED"; nil for any other text. Scripts'
// errors and the probe's refusal word (see scripts/lua/marker.lua) both carry it.
func gateWord(text string, ours Settings) error {
	word, rest, _ := strings.Cut(text, " ")
	switch word {
	case "SETTINGS":
		if recorded, _, _ := strings.Cut(rest, " "); recorded != "" {
			return &SettingsError{Ours: ours, Recorded: ParseSettings(recorded)}
		}
	case "UNPLANTED":
		return ErrUnplanted
	}
	return nil
}

// probedState is a master's state after a probe that answered mk, unsafe
// being why its configuration is unsafe (nil if it is not).
func probedState(unsafe error, mk markerReply) (State, error) {
	switch {
	case unsafe != nil:
		return StateUnsafe, unsafe
	case errors.Is(mk.refusal, ErrSettings):
		return StateSettings, mk.refusal
	case mk.refusal != nil:
		return StateQuarantined, mk.refusal
	case mk.left > 0:
		return StateQuarantined, ErrQuarantined
	}
	return StateUp, nil
}

// noteMarker records what the marker records, and logs a marker planted
// anew.
func (m *master) noteMarker(mk markerReply) {
	m.view.Store(int32(ClassifyMarker(mk.refusal, mk.recorded, m.cluster.settings)))
	m.mu.Lock()
	m.refusal, m.recorded = mk.refusal, mk.recorded
	m.mu.Unlock()
	if mk.replanted != nil {
		m.log.Warn("master recorded other settings than a majority of masters: planted anew with the majority's (this agent's); it is quarantined",
			"recorded", *mk.replanted, "settings", mk.recorded, "quarantine_left_ms", mk.left)
	}
}

// ClassifyMarker is what a probe saw of a master's marker (see scripts/lua/marker.lua):
// refusal is the gate's refusal as the probe reads it (a *SettingsError,
// ErrUnplanted, or nil), recorded the settings the marker records after the
// probe, ours the agent's (in their canonical form). A marker the probe
// planted anew records ours, with no refusal.
func ClassifyMarker(refusal error, recorded, ours string) rules.MarkerView {
	switch {
	case refusal == nil && recorded == ours:
		return rules.ViewOurs
	case errors.Is(refusal, ErrSettings):
		return rules.ViewOther
	}
	return rules.ViewNone
}

// gateShards runs the probe's gate (scripts/lua/marker.lua) on each shard's first slot.
func (m *master) gateShards(ctx context.Context, list []*shard) {
	calls := make([]call, len(list))
	c := m.cluster
	args := c.gateArgs()
	for i, sh := range list {
		calls[i] = call{keys: []string{c.keys.SlotMarker(sh.slots[0])}, args: append(args[:2:2], "0")}
	}
	conn := m.conn(laneHealth)
	if conn == nil { // closed: the agent stops
		for _, sh := range list {
			sh.state, sh.err = StateDown, ErrNotConnected
		}
		return
	}
	for i, r := range m.shards.evalEach(ctx, conn, scripts.Marker, calls, false) {
		mk, err := readMarker(r, c.cfg.Settings)
		sh := list[i]
		if err != nil {
			sh.state, sh.err = StateDown, err
			continue
		}
		sh.epoch, sh.run, sh.recorded = mk.epoch, mk.run, mk.recorded
		sh.view = ClassifyMarker(mk.refusal, mk.recorded, c.settings)
		sh.state, sh.err = probedState(nil, mk)
	}
}

// The tail horizon: how a master that lost its data sits out every tail it
// forgot (issue 18).
//
// A master's quarantine is one lease because every record older than that
// is renewed, and so re-created by the watchdog's repair, by an agent that
// is alive. A tail (see scripts/lua/tails.lua) is renewed by nobody: its hold is over,
// and its agent is often the one that died. So a master that restarted
// empty and votes again after one lease lacks every tail it had; if a
// second master then restarts empty, the two grant the name while the
// delay (the min_hold) still stands, though no more than one master ever
// failed at a time.
//
// So every master keeps a horizon: its marker's field tail_until, the
// master's ms by which every tail it keeps, or may come to keep, has ended.
// Every script that gives a record a tail's PX (a grant or a repair with a
// tail, a tailed renewal, an end that leaves a tail) raises it to that PX
// (tail_mark). A record's PX already covers every tail it can become: a
// dead agent's record ends lease + delay after its last renewal, an end
// before then leaves a delay that ends sooner, and the PX never falls short
// of min_until. Holds without a tail never touch it.
//
// A marker the gate plants (the master lost its data) says tails=pending.
// The health probe of any agent that finds a master quarantined and pending
// asks the other masters for their horizons (scripts/lua/horizon.lua: the horizon, or
// the quarantine left, whichever is later: a quarantined master stands for
// every record it forgot until then) and lengthens the quarantine to the
// latest (scripts/lua/settle_tails.lua), which clears pending. It needs the answers of
// enough masters that are not pending themselves to meet every majority of
// the others (see settleHorizon): a tail stood on a majority, so on all of
// it but the lost master, and one of those answers. Meanwhile the master is
// quarantined for its lease anyway; every agent probes it every probe
// interval, so the horizon is settled long before that ends.
//
// Why not the other ways: re-creating tails from the agents that know them
// (as the watchdog repairs holds) misses the tails of the agents that
// died, which are the ones delay= is for; and a quarantine as long as the
// longest possible tail (24 hours of min_hold) for every lost master would
// cost everyone for the sake of names that rarely have one. With the
// horizon a quarantine is one lease unless tails stand, and as long as the
// longest of them when they do.
//
// What it does not do: if no agent settles a pending master before its
// lease-long quarantine ends (no agent reaches it, or enough other masters,
// for a whole lease), the master votes without its tails, as before; and
// when more than a minority of the masters lost their data at once (a fault
// beyond what a majority survives), it is settled with what the masters
// that kept theirs know.

// errHorizonReply is a horizon reply of the wrong shape.
var errHorizonReply = errors.New("unexpected horizon reply")

// readHorizon reads a scripts/lua/horizon.lua reply.
func readHorizon(r rueidis.RedisResult) rules.Horizon {
	vals, err := r.ToArray()
	if err != nil || len(vals) != 3 {
		return rules.Horizon{}
	}
	epoch, err1 := vals[0].ToString()
	lost, err2 := vals[1].AsInt64()
	left, err3 := vals[2].AsInt64()
	if err := errors.Join(err1, err2, err3); err != nil {
		return rules.Horizon{}
	}
	return rules.Horizon{Answered: true, Epoch: epoch, Lost: lost == 1, Left: time.Duration(left) * time.Millisecond}
}

// settleTails is the probe's part in the tail horizon (see above): if m is
// pending, it asks the other masters for their horizons and, when
// settleHorizon says so, lengthens m's quarantine to the latest, with the
// drift allowance. Once m's epoch is settled it costs nothing.
func (m *master) settleTails(ctx context.Context) {
	c := m.cluster
	m.mu.RLock()
	settled := m.settledEpoch == m.epoch
	m.mu.RUnlock()
	if settled {
		return
	}
	own := m.horizon(ctx, laneHealth)
	if own.Answered && !own.Lost {
		m.noteSettled(own.Epoch) // planted before tails were pending, or settled by another agent
	}
	if !own.Answered || !own.Lost || own.Epoch == "" {
		return
	}
	others := c.otherHorizons(ctx, m.index)
	left, settle, complete := rules.SettleHorizon(len(c.masters), others)
	if !settle {
		return
	}
	ms := left + time.Duration(float64(left)*c.cfg.DriftFactor) + 10*time.Millisecond
	quarantine, err := m.evalOn(ctx, laneHealth, scripts.SettleTails, []string{c.keys.Marker()},
		[]string{own.Epoch, strconv.FormatInt(ms.Milliseconds(), 10)}).AsInt64()
	if err != nil || quarantine < 0 {
		return
	}
	m.noteSettled(own.Epoch)
	m.quarantined(time.Duration(quarantine) * time.Millisecond)
	if !complete {
		m.log.Warn("master lost its data while too many others did too: its tails may end early", "quarantine_ms", quarantine)
		return
	}
	m.log.Info("master that lost its data sits out the tails the others keep", "quarantine_ms", quarantine)
}

// noteSettled records that epoch's tails were settled on m.
func (m *master) noteSettled(epoch string) {
	m.mu.Lock()
	m.settledEpoch = epoch
	m.mu.Unlock()
}

// otherHorizons asks every master but skip for its horizon, at once.
func (c *Cluster) otherHorizons(ctx context.Context, skip int) []rules.Horizon {
	out := make([]rules.Horizon, 0, len(c.masters)-1)
	answers := make(chan rules.Horizon, len(c.masters))
	for i, m := range c.masters {
		if i != skip {
			go func() { answers <- m.horizon(ctx, laneRounds) }()
		}
	}
	for range len(c.masters) - 1 {
		out = append(out, <-answers)
	}
	return out
}
