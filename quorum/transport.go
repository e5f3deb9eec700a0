package quorum

import (
	"context"
	"time"

	"github.com/lock-agent/lock-agent/quorum/rules"
	"github.com/lock-agent/lock-agent/quorum/scripts"
	"github.com/redis/rueidis"
)

// transport is how a master reaches its server or servers, behind one
// interface as redsync's Pool is: standalone, one server (perhaps found
// through its Sentinels), and sharded, a Redis Cluster whose keys, markers
// and quarantines are one per hash slot (see shards.go, shardprobe.go,
// shardwatch.go). A master holds one, set in New; its methods of the same
// names (probe, quarantined, ...) hand on to it.
type transport interface {
	// probe checks the server(s) and runs the probe's gate.
	probe(runCtx context.Context)
	// run runs s on c, the master's connection l (args with the gate's
	// arguments completed); runMulti runs s once per call on c, the bulk
	// connection.
	run(ctx context.Context, l lane, c rueidis.Client, s *scripts.Script, keys, args []string) rueidis.RedisResult
	runMulti(ctx context.Context, c rueidis.Client, s *scripts.Script, calls []call) []rueidis.RedisResult
	// quarantined records that a vote answered the master is quarantined
	// for left more.
	quarantined(left time.Duration)
	// loadScripts puts every script in the server's cache.
	loadScripts(runCtx context.Context)
	// horizon is the master's tail horizon, asked on connection l.
	horizon(ctx context.Context, l lane) rules.Horizon
	// markerReplies runs s with args on the master's marker, or markers.
	markerReplies(ctx context.Context, s *scripts.Script, args []string) []rueidis.RedisResult
	// settingsMarker is the marker whose settings are the master's.
	settingsMarker() string
	// voteErr says why a call of spec may not count as a vote (nil if it may).
	voteErr(spec roundSpec) error
	// publishOn publishes message on channel from outside a script, on c.
	publishOn(ctx context.Context, c rueidis.Client, channel, message string)
	// subscribeLoop, subscribe and unsubscribe keep the master's side of
	// the watches (see watch.go).
	subscribeLoop(ctx context.Context)
	subscribe(ctx context.Context, ch string) bool
	unsubscribe(ctx context.Context, ch string)
	// shardStatus is the master's shards for STATUS (none when standalone).
	shardStatus() []ShardStatus
	// perSlot says whether a call's keys must share a hash slot: batches of
	// names are not sent to such a master, renewals are cut per slot (see
	// renewCalls), and its marker facts are per slot, not the master's.
	perSlot() bool
}

// standalone is a master that is one server. Most of its methods are
// written beside the concept they serve (master.go, gate.go, watch.go).
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
func (m standalone) perSlot() bool              { return false }

// sharded is a master that is a Redis Cluster: see shards.go.
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

// publishOn publishes with SPUBLISH (see shardwatch.go).
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

// The master's methods that hand on to its transport.

func (m *master) probe(runCtx context.Context)                      { m.t.probe(runCtx) }
func (m *master) quarantined(left time.Duration)                    { m.t.quarantined(left) }
func (m *master) loadScripts(runCtx context.Context)                { m.t.loadScripts(runCtx) }
func (m *master) horizon(ctx context.Context, l lane) rules.Horizon { return m.t.horizon(ctx, l) }
func (m *master) subscribeLoop(ctx context.Context)                 { m.t.subscribeLoop(ctx) }
func (m *master) subscribe(ctx context.Context, ch string) bool     { return m.t.subscribe(ctx, ch) }
func (m *master) unsubscribe(ctx context.Context, ch string)        { m.t.unsubscribe(ctx, ch) }
