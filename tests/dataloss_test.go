package tests

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/agent"
	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// grant is one contender's grant: when its OK arrived, and its fence.
type grant struct {
	who   string
	at    time.Time
	fence int64
}

// contenders try for name until stop closes: a waiter parked on a, a
// poller on a, and a poller on each agent in more (started later). Each
// grant is recorded and released at once.
type contenders struct {
	mu     sync.Mutex
	grants []grant
	stop   chan struct{}
	wg     sync.WaitGroup
}

func contend(t *testing.T, name string, waiterOn string, pollers ...string) *contenders {
	cs := &contenders{stop: make(chan struct{})}
	record := func(who string, r agenttest.Reply) {
		cs.mu.Lock()
		cs.grants = append(cs.grants, grant{who, time.Now(), r.Int("fence")})
		cs.mu.Unlock()
	}
	if waiterOn != "" {
		w := agenttest.Dial(t, waiterOn)
		cs.wg.Add(1)
		go func() {
			defer cs.wg.Done()
			_, ch := w.Send("LOCK " + name + " wait=forever")
			select {
			case r := <-ch:
				if r.Kind == "OK" {
					record("waiter", r)
					w.Do("UNLOCK " + name)
				}
			case <-cs.stop:
			}
		}()
	}
	for i, sock := range pollers {
		p := agenttest.Dial(t, sock)
		cs.wg.Add(1)
		go func() {
			defer cs.wg.Done()
			for {
				select {
				case <-cs.stop:
					return
				case <-time.After(5 * time.Millisecond):
				}
				if r := p.Do("LOCK " + name + " wait=0"); r.Kind == "OK" {
					record("poller"+string(rune('0'+i)), r)
					p.Do("UNLOCK " + name)
				}
			}
		}()
	}
	return cs
}

// check waits until the contenders were granted the name a few times (once
// a quarantine is over, say), stops them, and fails if any was granted
// before the holder's hold ended (its UNLOCK sent or its LOST received), or
// with a fence not above the holder's.
func (cs *contenders) check(t *testing.T, holderEnd time.Time, holderFence int64) {
	t.Helper()
	func() {
		defer func() { close(cs.stop); cs.wg.Wait() }()
		lockagenttest.Eventually(t, 10*time.Second, func() bool {
			cs.mu.Lock()
			defer cs.mu.Unlock()
			return len(cs.grants) >= 3
		}, "the contenders were not granted the name 3 times in 10s after the holder ended (liveness)")
	}()
	for _, g := range cs.grants {
		if g.at.Before(holderEnd) {
			t.Errorf("two holders: %s was granted %v before the holder's hold ended", g.who, holderEnd.Sub(g.at))
		}
		if g.fence <= holderFence {
			t.Errorf("%s got fence %d, not above the holder's %d", g.who, g.fence, holderFence)
		}
	}
}

// dataLossAgents starts agents a and b over three new masters, and returns
// an unstarted configuration for a third agent that will first meet the
// masters mid-fault (so it must not be bootstrapped).
func dataLossAgents(t *testing.T, lease, maxTTL time.Duration) (a, b *agenttest.Agent, late agent.Config, servers []*redistest.Server) {
	return dataLossAgentsOver(t, 3, lease, maxTTL)
}

// dataLossAgentsOver is dataLossAgents over n new masters.
func dataLossAgentsOver(t *testing.T, n int, lease, maxTTL time.Duration) (a, b *agenttest.Agent, late agent.Config, servers []*redistest.Server) {
	servers = redistest.Start(t, n)
	configs := make([]agent.Config, 3)
	for i, id := range []string{"host-a", "host-b", "host-c"} {
		if i < 2 {
			configs[i] = agenttest.Config(t, servers, lease)
		} else {
			configs[i] = agenttest.ConfigNoBootstrap(t, servers, lease)
		}
		configs[i].AgentID = id
		configs[i].Lock.MaxTTL = maxTTL
	}
	t.Cleanup(func() {
		for _, s := range servers {
			s.Resume()
		}
	})
	return agenttest.Start(t, configs[0]), agenttest.Start(t, configs[1]), configs[2], servers
}

// TestKleppmannOrdering: h1 is granted on m0 and m1 while m2 is down; m2
// returns; m1 restarts empty; then others ask — a waiter parked on another
// agent, pollers, and an agent started during m1's quarantine. Nobody may
// be granted the name while h1 holds it, with a watchdog hold or a ttl=
// hold longer than the lease. Either is renewed, and either, left on one
// master of three when m1 restarts before a renewal re-created it on m2, is
// lost (reason=quorum); once re-created on m2 it outlives m1's restart, a
// ttl= hold until its end (reason=expired).
func TestKleppmannOrdering(t *testing.T) {
	t.Parallel() // see TestMain
	for _, tc := range []struct {
		name string
		lock string
		// repaired: m1 restarts one renewal after m2 returned, so the
		// watchdog has re-created the hold on m2 and h1 keeps it.
		repaired bool
	}{
		{"a watchdog hold", "LOCK k", false},
		{"a watchdog hold repaired before the restart", "LOCK k", true},
		{"a ttl= hold longer than the lease", "LOCK k ttl=2500ms", false},
		{"a ttl= hold longer than the lease repaired before the restart", "LOCK k ttl=2500ms", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b, late, servers := dataLossAgents(t, time.Second, 3*time.Second)
			holder := agenttest.Dial(t, a.Config.Socket.Path)
			servers[2].Pause()
			holder.AwaitMasters("down", 1)
			sent := time.Now()
			r := holder.Do(tc.lock)
			if r.Kind != "OK" {
				t.Fatal(r.Line)
			}
			fence := r.Int("fence")
			// A ttl= hold is the holder's until its end, ttl after its
			// grant: counted from before the LOCK was sent, no later than
			// the agent's.
			ttlEnd := sent.Add(ttlOf(t, tc.lock))
			servers[2].Resume()
			holder.AwaitMasters("up", 3)
			if tc.repaired {
				lockagenttest.Eventually(t, 2*time.Second, func() bool { return servers[2].Keys("lock-agent:{k}:h:*") == 1 },
					"no renewal re-created the hold on the master that missed the grant")
			}
			servers[1].Restart()                // empty: it forgot h1
			c := agenttest.StartNoWait(t, late) // first meets m1 empty, during its quarantine
			cs := contend(t, "k", b.Config.Socket.Path, b.Config.Socket.Path, c.Config.Socket.Path)
			// h1's hold ends at its LOST (a hold left on a single master),
			// at its UNLOCK after 2.5 s, or for a ttl= hold at its end, when
			// the agent sends LOST and gives it back: on a busy host the
			// holder may read that LOST after the masters let go.
			var end time.Time
			if p := holder.Push(2500 * time.Millisecond); p != "" {
				end = time.Now()
				ttl, expired := strings.Contains(tc.lock, "ttl="), strings.Contains(p, "reason=expired")
				switch {
				case !strings.HasPrefix(p, "* LOST k "):
					t.Fatalf("holder heard %q", p)
				case ttl && expired:
					end = ttlEnd
				case tc.repaired:
					t.Fatalf("a hold on two masters of three was lost before its end: %q", p)
				}
				t.Logf("holder was told %q", p)
			} else {
				end = time.Now()
				if r := holder.Do("UNLOCK k"); r.Kind != "OK" {
					t.Fatal(r.Line)
				}
			}
			cs.check(t, end, fence)
		})
	}
}

// TestFlushallWhileHeld empties every master while a lock is held: the
// holder must hear LOST before anyone else is granted the name, and the next
// fence must still be greater than the holder's.
func TestFlushallWhileHeld(t *testing.T) {
	t.Parallel() // see TestMain
	a, b, late, servers := dataLossAgents(t, time.Second, time.Second)
	holder := agenttest.Dial(t, a.Config.Socket.Path)
	r := holder.Do("LOCK f")
	if r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	fence := r.Int("fence")
	for _, s := range servers {
		if _, err := s.Do("FLUSHALL"); err != nil {
			t.Fatal(err)
		}
	}
	c := agenttest.StartNoWait(t, late)
	cs := contend(t, "f", b.Config.Socket.Path, b.Config.Socket.Path, c.Config.Socket.Path)
	p := holder.Push(3 * time.Second)
	end := time.Now()
	if !strings.HasPrefix(p, "* LOST f ") {
		t.Fatalf("holder heard %q after every master was flushed", p)
	}
	cs.check(t, end, fence) // once the quarantine is over
}

// TestKleppmannOrderingMixedMaxTTL is the scenario with agents that
// do not share lock.max_ttl: "long" (max_ttl 5s) holds k with ttl=3s,
// granted by m0 and m1 while m2 was paused; m2 returns; m1 restarts empty,
// and agents with max_ttl 100ms are the first to meet it (long's way to m1
// is cut until m1 is quarantined, so the marker is theirs). When a
// quarantine was max(lease, max_ttl) of whoever met the master first, m1
// voted again after 1s, with long's 3s records alive on m0 only. Now every
// record lives one lease unless renewed, and the quarantine is one lease for
// every agent: nobody may be granted k while long holds it.
func TestKleppmannOrderingMixedMaxTTL(t *testing.T) {
	t.Parallel() // see TestMain
	const lease, ttl = time.Second, 3 * time.Second
	servers := redistest.Start(t, 3)
	t.Cleanup(func() {
		for _, s := range servers {
			s.Resume()
		}
	})
	longCfg := agenttest.Config(t, servers, lease)
	longCfg.AgentID, longCfg.Lock.MaxTTL = "long", 5*time.Second
	toM1 := newCutProxy(t, servers[1].Addr)
	longCfg.Masters[1].Address = toM1.Addr()
	otherCfg := agenttest.Config(t, servers, lease)
	otherCfg.AgentID, otherCfg.Lock.MaxTTL = "other", 100*time.Millisecond
	shortCfg := agenttest.ConfigNoBootstrap(t, servers, lease)
	shortCfg.AgentID, shortCfg.Lock.MaxTTL = "short", 100*time.Millisecond
	long, other := agenttest.Start(t, longCfg), agenttest.Start(t, otherCfg)

	holder := agenttest.Dial(t, long.Config.Socket.Path)
	servers[2].Pause()
	holder.AwaitMasters("down", 1)
	sent := time.Now()
	r := holder.Do("LOCK k ttl=" + ttl.String())
	if r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	fence := r.Int("fence")
	ttlEnd := sent.Add(ttl)
	servers[2].Resume()
	holder.AwaitMasters("up", 3)

	toM1.Cut()
	servers[1].Restart() // empty: it forgot long's hold
	restarted := time.Now()
	short := agenttest.StartNoWait(t, shortCfg)
	watcher := agenttest.Dial(t, other.Config.Socket.Path)
	watcher.AwaitMasters("quarantined", 1) // planted by other or short, with their settings
	toM1.Restore()

	cs := contend(t, "k", other.Config.Socket.Path, other.Config.Socket.Path, short.Config.Socket.Path)
	// long's hold ends at its LOST: expired at its ttl, or, had no renewal
	// repaired m2 before m1 restarted, quorum (a hold on one master of three).
	p := holder.Push(ttl + time.Second)
	end := time.Now()
	switch {
	case strings.HasPrefix(p, "* LOST k ") && strings.Contains(p, "reason=expired"):
		end = ttlEnd // the holder may read it after the masters let go
	case strings.HasPrefix(p, "* LOST k ") && strings.Contains(p, "reason=quorum"):
	default:
		t.Fatalf("holder heard %q", p)
	}
	t.Logf("holder was told %q %v after m1 restarted", p, end.Sub(restarted).Round(time.Millisecond))
	cs.mu.Lock()
	if len(cs.grants) > 0 && cs.grants[0].at.Before(end) {
		g := cs.grants[0]
		t.Errorf("OVERLAP: %s granted k (fence %d) %v after m1 restarted, %v before long's hold ended",
			g.who, g.fence, g.at.Sub(restarted).Round(time.Millisecond), end.Sub(g.at).Round(time.Millisecond))
	}
	cs.mu.Unlock()
	cs.check(t, end, fence)
}

// ttlOf is the ttl= of a LOCK line, 0 if none.
func ttlOf(t *testing.T, line string) time.Duration {
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, "ttl="); ok {
			d, err := time.ParseDuration(v)
			if err != nil {
				t.Fatal(err)
			}
			return d
		}
	}
	return 0
}
