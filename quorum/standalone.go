package quorum

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/lock-agent/lock-agent/quorum/rules"
	"github.com/lock-agent/lock-agent/quorum/scripts"
	"github.com/redis/rueidis"
)

// standalone is a master that is one server (perhaps found through its
// Sentinels): one of the two transports of a master (see transport in
// master.go; the other, a Redis Cluster, is in shards.go). Here are its
// calls, its probe, its script cache, its tail horizon, its side of the
// watches, and the failover of a primary that Sentinels promote.
type standalone struct{ *master }

func (m standalone) markerReplies(ctx context.Context, s *scripts.Script, args []string) []rueidis.RedisResult {
	return []rueidis.RedisResult{m.eval(ctx, s, []string{m.cluster.keys.Marker()}, args)}
}

func (m standalone) settingsMarker() string { return m.cluster.keys.Marker() }

// voteErr: a standalone master that may not vote is left out of the round
// (see Cluster.voters).
func (m standalone) voteErr(roundSpec) error { return nil }

func (m standalone) publishOn(ctx context.Context, c rueidis.Client, channel, message string) {
	c.Do(ctx, c.B().Publish().Channel(channel).Message(message).Build())
}

func (m standalone) shardStatus() []ShardStatus { return nil }

func (m standalone) perSlot() bool { return false }

// quarantined records that the master answered it is quarantined for left
// more: it is skipped until then, and its holds are gone, so waiters may
// now win elsewhere.
func (m standalone) quarantined(left time.Duration) {
	until := m.cluster.clock.Now().Add(left)
	m.mu.Lock()
	fresh := !m.cluster.clock.Now().Before(m.quarantine)
	if until.After(m.quarantine) {
		m.quarantine = until
	}
	down := m.state == StateDown // only the probe brings a master back from down
	m.mu.Unlock()
	if fresh && !down {
		m.setState(StateQuarantined, ErrQuarantined)
		m.cluster.wakeAll()
	}
}

// loadScripts puts every script in the master's cache, so that EVALSHA does
// not answer NOSCRIPT and get re-sent behind commands issued after it.
// (Should that still happen, after a restart that kept the data, release
// tombstones keep it harmless.)
func (m standalone) loadScripts(runCtx context.Context) {
	c := m.getClient()
	if c == nil {
		return
	}
	// A stop does not wait for a master that does not answer (see
	// Cluster.Run): the call runs to its deadline whatever runCtx says.
	ctx, cancel := context.WithTimeout(runCtx, max(20*m.cluster.cfg.MasterTimeout, time.Second))
	defer cancel()
	cmds := make(rueidis.Commands, len(scripts.All))
	for i, s := range scripts.All {
		cmds[i] = c.B().ScriptLoad().Script(s.Src).Build()
	}
	results, ok := unlessStopped(runCtx, func() []rueidis.RedisResult { return c.DoMulti(ctx, cmds...) }, func([]rueidis.RedisResult) {})
	if !ok {
		return
	}
	for _, r := range results {
		if err := r.Error(); err != nil {
			m.log.Debug("script load failed; EVALSHA will fall back to EVAL", "error", err)
			return
		}
	}
}

// probe checks the master answers within a master_timeout (twice), runs the
// epoch gate (which plants a quarantined marker on a master that lost its
// data, and checks the settings it records), and now and then checks that
// the master is configured safely.
func (m standalone) probe(runCtx context.Context) {
	cfg := &m.cluster.cfg
	// Generous: a busy master (or a busy agent) is not a dead one, and
	// rounds decide without a hung master before it is marked down. A
	// master whose answers have been slow gets four of its timeouts; a
	// paused one's estimate stays what it was before it fell silent.
	ctx, cancel := context.WithTimeout(runCtx, max(4*cfg.MasterTimeout, 500*time.Millisecond, 4*m.timeout()))
	defer cancel()
	mk, err := m.gate(ctx)
	if err != nil {
		m.probeFailed(err)
		return
	}
	now := m.cluster.clock.Now()
	m.mu.Lock()
	m.failures = 0
	lostData := m.epoch != "" && mk.epoch != m.epoch
	m.epoch = mk.epoch
	m.noteMarkerFactsLocked(mk, lostData)
	if until := now.Add(time.Duration(mk.left) * time.Millisecond); until.After(m.quarantine) || mk.left == 0 {
		m.quarantine = until
	}
	check := m.checked.IsZero() || now.Sub(m.checked) >= cfg.SafetyInterval
	m.mu.Unlock()
	m.noteMarker(mk)
	if lostData {
		m.log.Warn("master lost its data (its epoch changed); its holds are gone", "epoch", mk.epoch)
		m.cluster.wakeAll()
	}
	if lostData || m.reload.Swap(false) {
		m.loadScripts(runCtx)
	}
	if check {
		if unsafe, ok := m.checkSafety(ctx); ok {
			m.mu.Lock()
			m.unsafe, m.checked = unsafe, now
			m.mu.Unlock()
		}
	}
	m.mu.RLock()
	unsafe := m.unsafe
	m.mu.RUnlock()
	m.setState(probedState(unsafe, mk))
	m.cluster.noteSettings()
	if mk.left > 0 {
		m.settleTails(ctx)
	}
}

// run runs s on c, the master's connection l, with keys and args (its
// gate's arguments completed): by EVALSHA, or EVAL when the master does
// not know it or the lane must read the run_id (see uncheckedRun).
func (m standalone) run(ctx context.Context, l lane, c rueidis.Client, s *scripts.Script, keys, args []string) rueidis.RedisResult {
	if gen, unchecked := m.uncheckedRun(l, s); unchecked {
		r := c.Do(ctx, c.B().Eval().Script(s.Fallback().Src).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build())
		m.checkedRun(l, gen, r)
		m.hear(r)
		return r
	}
	r := c.Do(ctx, c.B().Evalsha().Sha1(s.SHA).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build())
	if noScript(r.Error()) {
		m.reload.Store(true)
		r = c.Do(ctx, c.B().Eval().Script(s.Fallback().Src).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build())
	}
	m.hear(r)
	return r
}

// runMulti runs s once per call on c, the bulk connection, pipelined.
func (m standalone) runMulti(ctx context.Context, c rueidis.Client, s *scripts.Script, calls []call) []rueidis.RedisResult {
	cmds := make(rueidis.Commands, len(calls))
	gen, unchecked := m.uncheckedRun(laneBulk, s)
	for i, k := range calls {
		cmds[i] = m.multiCmd(c, s, k, unchecked)
	}
	out := c.DoMulti(ctx, cmds...)
	if len(out) > 0 {
		m.hear(out[len(out)-1])
	}
	if unchecked {
		m.checkedRun(laneBulk, gen, out...)
	}
	var redo []int
	for i, r := range out {
		if noScript(r.Error()) {
			redo = append(redo, i)
		}
	}
	if len(redo) > 0 {
		m.reload.Store(true)
		cmds = cmds[:0]
		for _, i := range redo {
			cmds = append(cmds, m.multiCmd(c, s, calls[i], true))
		}
		for j, r := range c.DoMulti(ctx, cmds...) {
			out[redo[j]] = r
		}
	}
	return out
}

// multiCmd is k's EVALSHA of s on c, or its EVAL with the source, with its
// gate arguments completed for m (see gateArgs) but the rest of its
// arguments not copied: a renewal's calls carry 512 each.
func (m standalone) multiCmd(c rueidis.Client, s *scripts.Script, k call, source bool) rueidis.Completed {
	before, gate, after := k.args, []string(nil), []string(nil)
	if g := s.GateArg; g >= 0 && g < len(k.args) {
		end := min(g+2, len(k.args))
		before, gate, after = k.args[:g], m.gateArgs(s, k.args[:end])[g:], k.args[end:]
	}
	n := int64(len(k.keys))
	if source {
		return c.B().Eval().Script(s.Fallback().Src).Numkeys(n).Key(k.keys...).Arg(before...).Arg(gate...).Arg(after...).Build()
	}
	return c.B().Evalsha().Sha1(s.SHA).Numkeys(n).Key(k.keys...).Arg(before...).Arg(gate...).Arg(after...).Build()
}

// horizon asks m for its tail horizon on connection l: the probe's for the
// master it probes, the rounds' for the others (their own probes use
// theirs).
func (m standalone) horizon(ctx context.Context, l lane) rules.Horizon {
	return readHorizon(m.evalOn(ctx, l, scripts.Horizon, []string{m.cluster.keys.Marker()}, nil))
}

// A standalone master's side of the watches: one pub/sub connection with
// every watched channel (a cluster master's: see shards.go).

// subscribeLoop keeps one dedicated pub/sub connection with every channel
// that has watchers. Messages published while it was down are lost, so every
// (re)subscription wakes every watcher to re-check.
func (m standalone) subscribeLoop(ctx context.Context) {
	for ctx.Err() == nil {
		select {
		case <-m.connected:
		case <-ctx.Done():
			return
		}
		c := m.getClient()
		if c == nil {
			return
		}
		dc, ok := unlessStopped(ctx, func() rueidis.DedicatedClient { dc, _ := c.Dedicate(); return dc }, func(dc rueidis.DedicatedClient) { dc.Close() })
		if !ok {
			return
		}
		wait := dc.SetPubSubHooks(rueidis.PubSubHooks{
			OnMessage: func(msg rueidis.PubSubMessage) { m.cluster.onMessage(msg.Channel, msg.Message) },
		})
		m.subMu.Lock()
		err := m.subscribeAll(ctx, dc)
		if err == nil {
			m.sub = dc
		}
		m.subMu.Unlock()
		if err == nil {
			m.cluster.wakeAll()
			select {
			case err = <-wait:
			case <-ctx.Done():
			}
			m.subMu.Lock()
			m.sub = nil
			m.subMu.Unlock()
		}
		// Closed, not handed back to the client's pool: that would
		// UNSUBSCRIBE with no deadline, which hangs for as long as a paused
		// master keeps the connection open. (The client's Close does not
		// close a connection dedicated to a subscription either.) Closing
		// waits up to a second for a paused master's answer to a PING, so
		// it is done aside: a stop waits for this loop (see Cluster.Run),
		// and a stop that came while it closed a failed connection took a
		// second more (TestBinaryStopsWithin5sWithMastersPaused: 5.5s).
		go dc.Close()
		if ctx.Err() != nil {
			return
		}
		m.log.Debug("subscriber reconnecting", "error", err)
		if !sleepCtx(ctx, m.cluster.cfg.ProbeInterval) {
			return
		}
	}
}

func (m *master) subscribeAll(ctx context.Context, dc rueidis.DedicatedClient) error {
	chans := m.cluster.watchedChannels()
	if len(chans) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 4*m.cluster.cfg.MasterTimeout)
	defer cancel()
	return dc.Do(ctx, dc.B().Subscribe().Channel(chans...).Build()).Error()
}

// subscribe adds one channel to a live subscription and says whether it
// was confirmed; without one the next (re)subscription picks it up. The
// subscriptions of many names made at once wait for each other here, so
// each one's deadline (4 of the master's timeouts: see RTT) counts from its own turn, not from
// the call. One that fails (the master did not confirm in time) ends the
// subscription's connection: subscribeLoop makes a new one with every
// channel watched, rather than leave this one without messages.
func (m standalone) subscribe(ctx context.Context, ch string) bool {
	m.subMu.Lock()
	defer m.subMu.Unlock()
	if m.sub == nil || !m.cluster.watched(ch) {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 4*m.timeout())
	defer cancel()
	if err := m.sub.Do(ctx, m.sub.B().Subscribe().Channel(ch).Build()).Error(); err != nil {
		m.log.Debug("subscribe failed: subscribing again on a new connection", "channel", ch, "error", err)
		m.dropSub()
		return false
	}
	return true
}

// dropSub closes the subscription's connection, with subMu held: it fails
// at once for the calls after this one, and subscribeLoop makes a new one.
// The close itself (up to a second for a paused master: see subscribeLoop)
// is done aside, not with subMu held, for subscribeLoop takes subMu when
// the connection ends, and a stop waits for subscribeLoop.
func (m *master) dropSub() {
	sub := m.sub
	go sub.Close()
}

// unsubscribe drops a channel that no watcher wants any more. The
// unsubscriptions of many names closed at once wait for each other here:
// the first to get its turn sends every one waiting, in one UNSUBSCRIBE.
// One at a time, 6000 watches closed at once were still unsubscribing 5 to
// 8 seconds later on a loaded host (each a round trip to every master, in
// turn with the subscriptions), and past 10s under the whole suite:
// TestClosedWatchesLeaveNoSubscription's "71 channels still subscribed".
// Its deadline counts from its turn, as a subscription's does: one that
// waited behind a burst of subscriptions past a deadline set before would
// not be sent at all, and the channel would stay subscribed for the
// connection's life (a message to this agent at every release of the name,
// and memory on the master). One that fails makes the connection anew,
// subscribed to the watched channels only.
func (m standalone) unsubscribe(ctx context.Context, ch string) {
	m.leaving.add(ch)
	m.subMu.Lock()
	defer m.subMu.Unlock()
	leaving := m.leaving.take(m.cluster.watched)
	if m.sub == nil || len(leaving) == 0 {
		return // without a connection, the next one subscribes the watched channels only
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 4*m.timeout())
	defer cancel()
	if err := m.sub.Do(ctx, m.sub.B().Unsubscribe().Channel(leaving...).Build()).Error(); err != nil {
		m.log.Debug("unsubscribe failed: subscribing again on a new connection", "channels", len(leaving), "error", err)
		m.dropSub()
	}
}

// A master may be a primary with replicas that a Sentinel (or an operator)
// promotes when the primary fails. A promoted replica has its own run_id
// and its primary's copy of the marker, so the gate meets it as a server
// that may have missed the last grants (see scripts/lua/gate.lua): it sits out a
// quarantine. What the run_id cannot catch is a split brain: an old
// primary that still takes writes from an agent that still reaches it,
// while other agents already use the promoted one. Redis bounds that with
// min-replicas-to-write and min-replicas-max-lag on the primary: cut off
// from its replicas, it refuses writes (NOREPLICAS) once their last
// acknowledgement is older than the lag. Its replicas stop acknowledging
// when one is promoted at the latest, and the primary notices within the
// lag plus two seconds (acknowledgements every second, ages counted in
// whole seconds, checked every second). So a master that may be a
// promoted replica sits out that much longer than the quarantine: every
// hold the old primary granted or renewed after the promotion has ended
// before the promoted one votes. docs/operations.md "The masters" has the
// settings.

// failoverSlack is how long after its replicas' last acknowledgement a
// primary with min-replicas-max-lag S may still take writes, beyond S.
const failoverSlack = 2*time.Second + 100*time.Millisecond

// sentinelRefresh is how often a Sentinel master's client asks the
// Sentinels where the primary is, beside their +switch-master events (a
// missed event would otherwise keep it on the old primary for good).
const sentinelRefresh = time.Second

// replicaLag is cfg.ReplicaLag, 1s by default for a Sentinel master and
// a Redis Cluster (whose shards fail over to their replicas).
func (cfg MasterConfig) replicaLag() time.Duration {
	if cfg.ReplicaLag == 0 && (len(cfg.Sentinels) > 0 || len(cfg.Cluster) > 0) {
		return time.Second
	}
	return cfg.ReplicaLag
}

// failoverMargin is how much longer than the quarantine a master that
// may be a promoted replica sits out: 0 for one whose replicas are never
// promoted.
func (cfg MasterConfig) failoverMargin() time.Duration {
	if lag := cfg.replicaLag(); lag > 0 {
		return lag + failoverSlack
	}
	return 0
}

// withSentinels makes opt ask the master's Sentinels for its primary, if
// it has any. Retries stay off: the client follows a failover by itself,
// and a lock script is never sent twice.
func (m *master) withSentinels(opt rueidis.ClientOption) rueidis.ClientOption {
	if len(m.cfg.Sentinels) == 0 {
		return opt
	}
	opt.InitAddress = m.cfg.Sentinels
	// The client pings a connection that received nothing for KeepAlive,
	// and drops it if the ping is not answered within ConnWriteTimeout. A
	// following of the Sentinel waits for that on an old primary that no
	// longer answers (it asks it for its ROLE, holding the client's lock):
	// at the default 30s, for the whole of a failover.
	opt.Dialer.KeepAlive = sentinelRefresh
	opt.Sentinel = rueidis.SentinelOption{
		MasterSet:               m.cfg.MasterSet,
		Username:                m.cfg.SentinelUsername,
		Password:                m.cfg.SentinelPassword,
		Dialer:                  opt.Dialer,
		TLSConfig:               opt.TLSConfig,
		TopologyRefreshInterval: sentinelRefresh,
	}
	return opt
}

// dialed hears of every connection the master's lane l makes: a new one
// may be to another server (a Sentinel's client following a failover, a
// restarted master), so the next probe checks its configuration again
// rather than keep the old server's verdict (a demoted primary is a
// replica; a promoted one may lack min-replicas-to-write), and the next
// vote on the lane reads the server's run_id (see uncheckedRun).
func (m *master) dialed(l lane) {
	m.dials[l].Add(1)
	m.mu.Lock()
	m.checked = time.Time{}
	m.mu.Unlock()
}

// uncheckedRun says whether a call of s on lane l must read the server's
// run_id (run s's fallback, which does: see scripts.Script.AfterRestart), and
// returns the lane's connection count to record once one did. It must
// when s runs the gate and the lane made a connection since a call last
// read it. A promoted replica answers EVALSHA with NOSCRIPT, so its first
// vote reads it anyway, but a primary demoted and later promoted again
// keeps its script cache (REPLICAOF does not clear it), and holds a copy
// of the marker that the agent verified on the other server: without the
// run_id, its votes would count until the probe's connection follows.
// (A connection is counted when it is dialed, a moment before the client
// sends on it: a call that reads the run_id on the old one in between is
// taken for a check of the new one.)
func (m *master) uncheckedRun(l lane, s *scripts.Script) (gen uint64, unchecked bool) {
	if s.AfterRestart == nil {
		return 0, false
	}
	gen = m.dials[l].Load()
	return gen, m.runChecked[l].Load() < gen
}

// checkedRun records that lane l read the server's run_id on connection
// gen, if any of the results is an answer of the script (an error reply
// may be the gate's write refused before it planted a marker).
func (m *master) checkedRun(l lane, gen uint64, results ...rueidis.RedisResult) {
	for _, r := range results {
		if r.Error() != nil {
			continue
		}
		for {
			old := m.runChecked[l].Load()
			if old >= gen || m.runChecked[l].CompareAndSwap(old, gen) {
				return
			}
		}
	}
}

// sentinelErr is what a failed connection of a Sentinel master means: an
// answer from the Sentinels, rather than a network error, is that they know
// no primary of the master set (a typo in master_set, or a set they do not
// monitor: "No such master with that name"). Unwrapped, it would read as
// the master's own error.
func (m *master) sentinelErr(err error) error {
	if _, answered := rueidis.IsRedisErr(err); len(m.cfg.Sentinels) == 0 || !answered {
		return err
	}
	return fmt.Errorf("the Sentinels know no primary of master_set %q (%v)", m.cfg.MasterSet, err)
}

// addressOf is the master's address for STATUS: its own, or for a
// Sentinel master "SET@server", the server c now sends to ("SET@?"
// before it connected).
func (m *master) addressOf(c rueidis.Client) string {
	if len(m.cfg.Cluster) > 0 {
		return "cluster@" + strings.Join(m.cfg.Cluster, ",")
	}
	if len(m.cfg.Sentinels) == 0 {
		return m.cfg.Address
	}
	server := "?"
	if c != nil {
		for addr := range c.Nodes() {
			server = addr
		}
	}
	return m.cfg.MasterSet + "@" + server
}
