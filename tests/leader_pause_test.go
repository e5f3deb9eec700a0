package tests

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// TestLeaderPushLagWithAMasterPaused: with one master of three paused
// (SIGSTOP: its connections stay open, it answers nothing), observers on
// the other agent still see each change within the push lag bound. The
// observation's renewal of its mark on the masters waits for the paused
// master (4×master_timeout) every lease/3; a read, and so a push, must not
// wait behind it. The changes come one after another for several lease/3,
// so that some fall while a renewal of the mark is under way.
func TestLeaderPushLagWithAMasterPaused(t *testing.T) {
	// A slow master_timeout makes a renewal of the mark wait 600ms for
	// the paused master: a push behind one is late by far more than the
	// bound, whatever the host's load.
	servers := redistest.Start(t, 3)
	agents := make([]*agenttest.Agent, 2)
	for i, id := range []string{"host-a", "host-b"} {
		cfg := agenttest.Config(t, servers, time.Second)
		cfg.AgentID, cfg.Lock.MasterTimeout = id, 150*time.Millisecond
		agents[i] = agenttest.Start(t, cfg)
	}
	t.Cleanup(func() { servers[0].Resume() }) // before the agents stop
	a, b := agents[0], agents[1]
	actor := agenttest.Dial(t, a.Config.Socket.Path)
	watcher := agenttest.Dial(t, b.Config.Socket.Path)
	obs := observe(t, watcher, "pause")
	if !obs.await(5*time.Second, func(es []leaderEvent) bool { return len(es) == 1 }) {
		t.Fatal("no first push")
	}
	servers[0].Pause()
	// Once the paused master is out of the votes, rounds do not wait for it.
	awaitMasters([]*agenttest.Conn{actor, watcher}, 5*time.Second, "down", 1)
	var lags []time.Duration
	measure := func(line string, seen func([]leaderEvent) bool) {
		start := time.Now()
		if r := actor.Do(line); r.Kind != "OK" {
			t.Fatal(r.Line)
		}
		if !obs.await(5*time.Second, seen) {
			t.Fatalf("%s: no push: %v", line, obs.snapshot())
		}
		es := obs.snapshot()
		lags = append(lags, es[len(es)-1].at.Sub(start))
	}
	for i := range 50 {
		v := strconv.Itoa(i)
		measure("LOCK pause value="+v, func(es []leaderEvent) bool { return es[len(es)-1].value == v })
		measure("UNLOCK pause", func(es []leaderEvent) bool { return es[len(es)-1].none })
	}
	slices.Sort(lags)
	p50, p99 := lags[len(lags)/2], lags[len(lags)*99/100]
	t.Logf("leader push lag with a master paused over %d changes: p50 %v, p99 %v, max %v", len(lags), p50, p99, lags[len(lags)-1])
	// 10ms is the target. The bound is what this test tells apart: a push
	// behind a renewal of the mark waits up to 4×master_timeout (600ms
	// here), and some of the 100 changes fall during one, so p99 lands
	// near 600ms; half of that is the host's share. (100ms, the bound of
	// TestLeaderPushLag with every master up, was passed at 123ms beside
	// two CPU hogs and the suite's other parts.)
	if p99 > 300*time.Millisecond {
		t.Fatalf("p99 lag %v with a master paused", p99)
	}
	obs.checkOrder("observer")
}
