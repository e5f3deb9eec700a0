package tests

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/faultproxy"
	"github.com/lock-agent/lock-agent/internal/history"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// partitionCluster is agents over three real masters, each agent reaching
// each master through a link of its own, which a test can break.
type partitionCluster struct {
	servers []*redistest.Server
	agents  []*agenttest.Agent
	links   [][]*faultproxy.Proxy // links[a][m]: agent a's link to master m
	control []*agenttest.Conn     // a session per agent, for STATUS
}

// newPartitionCluster starts one agent per lease over three new masters.
// Each agent's max_ttl is its lease, so that a master that lost its data
// sits out about that lease (the quarantine each agent plants is its own).
func newPartitionCluster(t *testing.T, leases ...time.Duration) *partitionCluster {
	c := &partitionCluster{servers: redistest.Start(t, 3)}
	for i, lease := range leases {
		cfg := agenttest.Config(t, c.servers, lease) // bootstraps the masters directly
		cfg.AgentID = fmt.Sprintf("host-%d", i)
		cfg.Lock.MaxTTL = lease
		var links []*faultproxy.Proxy
		for m, s := range c.servers {
			p, err := faultproxy.New(s.Addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(p.Close)
			links = append(links, p)
			cfg.Masters[m].Address = p.Addr
		}
		c.links = append(c.links, links)
		c.agents = append(c.agents, agenttest.Start(t, cfg))
		c.control = append(c.control, agenttest.Dial(t, cfg.Socket.Path))
	}
	t.Cleanup(c.heal) // before the agents stop: they release through healed links
	return c
}

// heal passes every link and resumes every master.
func (c *partitionCluster) heal() {
	for _, links := range c.links {
		for _, p := range links {
			p.SetMode(faultproxy.Pass)
		}
	}
	for _, s := range c.servers {
		s.Resume()
	}
}

// awaitHealed waits until every agent sees every master up: no fault, and
// no quarantine, is left.
func (c *partitionCluster) awaitHealed() {
	for _, ctl := range c.control {
		ctl.AwaitMastersWithin(15*time.Second, "up", len(c.servers))
	}
}

// awaitQuarantined waits until some agent sees master m quarantined: it
// met the master's data loss.
func (c *partitionCluster) awaitQuarantined(t *testing.T, m int) {
	lockagenttest.Eventually(t, 10*time.Second, func() bool { // polling STATUS, as AwaitMasters does
		for _, ctl := range c.control {
			if d := ctl.Do("STATUS").Data; len(d) > m && d[m]["state"] == "quarantined" {
				return true
			}
		}
		return false
	}, "no agent saw master %d quarantined after it lost its data", m)
}

// fault breaks something: start breaks it and returns what heals it,
// which the nemesis calls after lasts. A data loss lasts 0: its heal waits
// until an agent met the loss, and the nemesis then waits out the
// quarantine before the next fault.
type fault struct {
	name  string
	start func(rng *rand.Rand) (heal func())
	lasts time.Duration
}

func (c *partitionCluster) setModes(mode faultproxy.Mode, links ...*faultproxy.Proxy) func() {
	for _, p := range links {
		p.SetMode(mode)
	}
	return func() {
		for _, p := range links {
			p.SetMode(faultproxy.Pass)
		}
	}
}

// faults are the nemesis's faults, one at a time: each leaves every agent
// a majority, except a minority partition (which leaves the other agent
// one), and data is lost on one master at a time.
func (c *partitionCluster) faults(t *testing.T) []fault {
	agent := func(rng *rand.Rand) int { return rng.IntN(len(c.agents)) }
	master := func(rng *rand.Rand) int { return rng.IntN(len(c.servers)) }
	link := func(rng *rand.Rand) *faultproxy.Proxy { return c.links[agent(rng)][master(rng)] }
	return []fault{
		{"one link cut", func(rng *rand.Rand) func() { return c.setModes(faultproxy.Cut, link(rng)) }, faultFor},
		{"one link black-holed", func(rng *rand.Rand) func() { return c.setModes(faultproxy.BlackHole, link(rng)) }, faultFor},
		{"one link's replies vanish", func(rng *rand.Rand) func() { return c.setModes(faultproxy.BlackHoleToClient, link(rng)) }, faultFor},
		{"asymmetric: each agent cut from another master", func(rng *rand.Rand) func() {
			m := master(rng)
			cut := make([]*faultproxy.Proxy, len(c.agents))
			for a := range c.agents {
				cut[a] = c.links[a][(m+a)%len(c.servers)]
			}
			return c.setModes(faultproxy.Cut, cut...)
		}, faultFor},
		{"one link flapping", func(rng *rand.Rand) func() {
			p, mode := link(rng), []faultproxy.Mode{faultproxy.Cut, faultproxy.BlackHole}[rng.IntN(2)]
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { defer wg.Done(); p.Flap(ctx, mode, 50*time.Millisecond, 100*time.Millisecond) }()
			return func() { cancel(); wg.Wait() }
		}, faultFor},
		{"minority partition: one agent black-holed from two masters", func(rng *rand.Rand) func() {
			a, m := agent(rng), master(rng)
			return c.setModes(faultproxy.BlackHole, c.links[a][m], c.links[a][(m+1)%len(c.servers)])
		}, faultFor},
		{"one master paused", func(rng *rand.Rand) func() {
			s := c.servers[master(rng)]
			s.Pause()
			return s.Resume
		}, faultFor},
		{"one master restarted empty", func(rng *rand.Rand) func() {
			m := master(rng)
			c.servers[m].Restart()
			return func() { c.awaitQuarantined(t, m) }
		}, 0},
		{"one master flushed", func(rng *rand.Rand) func() {
			m := master(rng)
			if _, err := c.servers[m].Do("FLUSHALL"); err != nil {
				t.Errorf("FLUSHALL: %v", err)
			}
			return func() { c.awaitQuarantined(t, m) }
		}, 0},
	}
}

// faultFor is how long a fault lasts: longer than a lease of 1s, so that
// holds cut off from a majority are lost.
const faultFor = 1500 * time.Millisecond

// nemesis runs the faults in turn, for at least one round of all of them
// and until until, noting each in the history, and waits for the cluster
// to heal (a data loss's quarantine over) before the next. It returns how
// many faults it ran.
func (c *partitionCluster) nemesis(t *testing.T, h *history.History, rng *rand.Rand, until time.Time) int {
	ran := 0
	for round := 0; round == 0 || time.Now().Before(until); round++ {
		for _, f := range c.faults(t) {
			h.Add(history.Event{Client: -1, Type: history.Info, Detail: "fault: " + f.name})
			heal := f.start(rng)
			time.Sleep(f.lasts) // the fault's length, not a wait for an event
			heal()
			c.awaitHealed()
			h.Add(history.Event{Client: -1, Type: history.Info, Detail: "healed: " + f.name})
			ran++
		}
	}
	return ran
}
