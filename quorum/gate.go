package quorum

import (
	"context"
	"errors"
	"fmt"
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
// quarantine lasts: the tail horizon. Then what the agent tells of why a
// quarantined master holds nothing (Data), and the other thing that keeps a
// master from voting: a configuration that may forget holds (UnsafeError).
// A Redis Cluster master's gate per slot is in shards.go.

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
// the others (see rules.SettleHorizon): a tail stood on a majority, so on all of
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
// rules.SettleHorizon says so, lengthens m's quarantine to the latest, with
// the drift allowance. Once m's epoch is settled it costs nothing.
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

// A quarantined master holds nothing: it is new, or it lost its data
// (restarted empty, flushed, restored from a snapshot, replaced). The
// advice differs, and one of the two is dangerous to give for the other:
// `lock-agent bootstrap` spares a new deployment its first quarantine,
// but a master that lost its data and is bootstrapped votes at once, and
// can grant a name that a forgotten hold still protects. So an agent says
// "new" only when it is sure of it, as far as the masters can say: every
// master of the deployment was met with no marker (each marker was
// planted on a master that had none, or there is none yet) and none ever
// voted. It says "lost" when it knows the deployment served: it saw this
// master or another with an earlier epoch, or saw a master vote (a marker
// whose quarantine was over, or a bootstrap's). Otherwise it cannot tell,
// and says so; the advice is then the safe one (wait).

// Data is what an agent can tell of why a quarantined master holds nothing.
type Data string

// The Data an agent tells.
const (
	DataNone    Data = ""        // not quarantined
	DataNew     Data = "new"     // a new deployment: no master had a marker, none voted
	DataLost    Data = "lost"    // it lost its data, or is new to a deployment that served
	DataUnknown Data = "unknown" // new, or lost its data: the agent cannot tell
	DataChanged Data = "changed" // the settings command quarantined it (how=change): it kept its data
)

// MarkerFacts is what an agent's probes saw of one master's marker, for
// ClassifyData.
type MarkerFacts struct {
	// Probed: a probe of this agent's read its marker (or found none).
	Probed bool
	// EpochChanged: the agent saw it with another epoch (or a marker,
	// where it now has none) since it last voted.
	EpochChanged bool
	// Fresh: it has no marker, or one the gate planted on it while it had
	// none (how=plant).
	Fresh bool
	// Changed: its marker was last written by the settings command
	// (how=change), whose quarantine lets the holds of the old settings end.
	Changed bool
}

// MasterData is what an agent tells of one quarantined master (self),
// deployment being ClassifyData's answer: a master the settings command
// quarantined kept its data, whatever the deployment's story.
func MasterData(self MarkerFacts, deployment Data) Data {
	if self.Changed {
		return DataChanged
	}
	return deployment
}

// ClassifyData says what an agent knows of why a quarantined master holds
// nothing, from what its probes saw of every master of the deployment
// (masters) and whether it ever saw one of them vote (established). It is
// the same for every quarantined master: it is the deployment's story.
func ClassifyData(masters []MarkerFacts, established bool) Data {
	if established {
		return DataLost
	}
	for _, f := range masters {
		if f.EpochChanged {
			return DataLost
		}
	}
	for _, f := range masters {
		if !f.Probed || !f.Fresh {
			return DataUnknown
		}
	}
	return DataNew
}

// data is MasterData of each of c's masters, as the probes last saw their
// markers. A master that is a Redis Cluster has a marker per slot: the
// agent does not tell, for it or for the others, and says DataUnknown
// unless it knows that the deployment served.
func (c *Cluster) data() []Data {
	facts := make([]MarkerFacts, len(c.masters))
	for i, m := range c.masters {
		m.mu.RLock()
		facts[i] = MarkerFacts{Probed: m.probed && !m.t.perSlot(), EpochChanged: m.epochChanged, Fresh: m.fresh, Changed: m.changed}
		m.mu.RUnlock()
	}
	deployment := ClassifyData(facts, c.established.Load())
	out := make([]Data, len(facts))
	for i, f := range facts {
		out[i] = MasterData(f, deployment)
	}
	return out
}

// noteMarkerFacts records, after a probe that answered mk, what
// ClassifyData needs of this master; lostData says the probe found another
// epoch than the last one seen. A master that votes again is no longer
// "changed", and shows that the deployment serves. m.mu is held.
func (m *master) noteMarkerFactsLocked(mk markerReply, lostData bool) {
	m.probed = true
	m.fresh = errors.Is(mk.refusal, ErrUnplanted) || mk.how == "plant"
	m.changed = mk.how == "change"
	if lostData {
		m.epochChanged = true
	}
	if mk.left == 0 && mk.refusal == nil {
		m.epochChanged = false
		m.cluster.established.Store(true)
	}
}

// Advice is what to do about a quarantined master, given what the agent
// can tell (d): the only advice that is safe whatever happened. Only a new
// deployment is told of lock-agent bootstrap (for the next one: the markers
// planted now make it do nothing); a master that lost its data, or that
// may have, is to be waited out, never bootstrapped.
func (d Data) Advice() string {
	switch d {
	case DataNew:
		return "a new deployment (no master had a marker; none has voted yet): wait; next time, lock-agent bootstrap before the first agent starts spares this wait"
	case DataLost:
		return "it lost its data (restarted empty, flushed or restored) or joined a deployment that served: wait, every hold it may have forgotten must end first; never lock-agent bootstrap it"
	case DataChanged:
		return "the cluster's settings were changed (lock-agent settings): wait, every hold granted under the old ones must end first; never lock-agent bootstrap it"
	}
	return "new or lost its data (this agent cannot tell): wait; never lock-agent bootstrap a master that may have served locks"
}

// checkSafety reads the master's INFO and returns why it is unsafe, nil if
// it is safe, and ok false when it could not tell (a timeout on a busy
// master says nothing about its configuration: the last verdict stands).
// A master that refuses INFO cannot be checked, and is unsafe.
func (m *master) checkSafety(ctx context.Context) (unsafe error, ok bool) {
	c := m.conn(laneHealth)
	if c == nil {
		return nil, false
	}
	return m.checkSafetyOn(ctx, c)
}

// checkSafetyOn is checkSafety on the server c: the master, or a shard's
// primary.
func (m *master) checkSafetyOn(ctx context.Context, c rueidis.Client) (unsafe error, ok bool) {
	info, err := c.Do(ctx, c.B().Info().Build()).ToString()
	if _, refused := rueidis.IsRedisErr(err); refused {
		return &UnsafeError{Reason: "info-refused:" + token(describe(err))}, true
	}
	if err != nil {
		return nil, false
	}
	fields := infoFields(info)
	policy := replicaPolicy{allow: m.cfg.AllowReplicas, lag: m.cfg.replicaLag()}
	if unsafe := unsafeInfo(fields, policy); unsafe != nil || !policy.promotable(fields) {
		return unsafe, true
	}
	return m.checkReplicaGuard(ctx, c, fields, policy)
}

// replicaPolicy is what a master's configuration says of its replicas:
// allow accepts them unchecked (AllowReplicas), lag > 0 accepts replicas
// that may be promoted, under a guard (see standalone.go).
type replicaPolicy struct {
	allow bool
	lag   time.Duration
}

// promotable says whether the master has replicas that may be promoted,
// which its configuration must then guard against a split brain.
func (p replicaPolicy) promotable(fields map[string]string) bool {
	n, _ := strconv.Atoi(fields["connected_slaves"])
	return n > 0 && !p.allow && p.lag > 0
}

// infoFields are INFO's "key:value" lines as a map.
func infoFields(info string) map[string]string {
	fields := map[string]string{}
	for _, line := range strings.Split(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			fields[k] = v
		}
	}
	return fields
}

// unsafeInfo judges a master by its INFO fields. A master is unsafe when it
// is a replica (its data is whatever its master sent, and it refuses
// writes); when replicas are attached (a failover would promote one that
// missed the last grants), unless the policy allows them, or accepts
// promotable ones and the primary refuses writes without them
// (min-replicas-to-write and min-replicas-max-lag both set: INFO then
// reports min_slaves_good_slaves); or when its maxmemory policy may evict
// keys (an evicted holder key is a second holder; an evicted fence counter
// repeats fences). Fields a server does not report are not judged.
func unsafeInfo(fields map[string]string, policy replicaPolicy) error {
	if role, ok := fields["role"]; ok && role != "master" {
		return &UnsafeError{Reason: "role:" + role}
	}
	if n, _ := strconv.Atoi(fields["connected_slaves"]); n > 0 && !policy.allow {
		_, guarded := fields["min_slaves_good_slaves"]
		switch {
		case policy.lag == 0:
			return &UnsafeError{Reason: fmt.Sprintf("connected_slaves:%d", n)}
		case !guarded:
			return &UnsafeError{Reason: fmt.Sprintf("connected_slaves:%d-without-min-replicas-to-write", n)}
		}
	}
	if p, ok := fields["maxmemory_policy"]; ok && p != "noeviction" {
		return &UnsafeError{Reason: "maxmemory_policy:" + p}
	}
	return nil
}

// checkReplicaGuard reads the primary's min-replicas settings, when it lets
// CONFIG GET be run, and returns why they do not bound a split brain: every
// replica must acknowledge (one left out may be the one promoted, while
// the old primary goes on with the others), within the master's
// ReplicaLag (the failover margin counts on it). A primary that refuses
// CONFIG is judged by its INFO alone.
func (m *master) checkReplicaGuard(ctx context.Context, c rueidis.Client, fields map[string]string, policy replicaPolicy) (error, bool) {
	vals, err := c.Do(ctx, c.B().ConfigGet().Parameter("min-replicas-to-write", "min-replicas-max-lag").Build()).AsStrMap()
	if _, refused := rueidis.IsRedisErr(err); refused {
		return nil, true
	}
	if err != nil {
		return nil, false
	}
	replicas, _ := strconv.Atoi(fields["connected_slaves"])
	toWrite, _ := strconv.Atoi(vals["min-replicas-to-write"])
	maxLag, _ := strconv.Atoi(vals["min-replicas-max-lag"])
	switch {
	case toWrite < replicas:
		return &UnsafeError{Reason: fmt.Sprintf("min-replicas-to-write:%d<connected_slaves:%d", toWrite, replicas)}, true
	case time.Duration(maxLag)*time.Second > policy.lag:
		return &UnsafeError{Reason: fmt.Sprintf("min-replicas-max-lag:%d>max_replica_lag:%s", maxLag, policy.lag)}, true
	}
	return nil, true
}
