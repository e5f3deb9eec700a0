package tests

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
	"github.com/redis/rueidis"
)

// report adds p50 and p99 of samples, in microseconds, to the benchmark.
func report(b *testing.B, prefix string, samples []time.Duration) {
	if len(samples) == 0 {
		return
	}
	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
	q := func(p float64) float64 {
		return float64(samples[int(p*float64(len(samples)-1))].Microseconds())
	}
	b.ReportMetric(q(0.50), prefix+"p50-µs")
	b.ReportMetric(q(0.99), prefix+"p99-µs")
}

// BenchmarkLockUnlock is one client's uncontended LOCK + UNLOCK round trip
// through the agent and three local masters.
func BenchmarkLockUnlock(b *testing.B) {
	servers := redistest.Start(b, 3)
	a := agenttest.Start(b, agenttest.Config(b, servers, 15*time.Second))
	c := agenttest.Dial(b, a.Config.Socket.Path)
	samples := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if r := c.Do("LOCK bench"); r.Kind != "OK" {
			b.Fatal(r.Line)
		}
		if r := c.Do("UNLOCK bench"); r.Kind != "OK" {
			b.Fatal(r.Line)
		}
		samples = append(samples, time.Since(start))
	}
	b.StopTimer()
	report(b, "", samples)
}

// BenchmarkLockUnlock64Clients is 64 connections locking and unlocking
// distinct names at once: the agent's throughput.
func BenchmarkLockUnlock64Clients(b *testing.B) {
	servers := redistest.Start(b, 3)
	a := agenttest.Start(b, agenttest.Config(b, servers, 15*time.Second))
	const clients = 64
	conns := make([]*agenttest.Conn, clients)
	for i := range conns {
		conns[i] = agenttest.Dial(b, a.Config.Socket.Path)
	}
	var mu sync.Mutex
	var samples []time.Duration
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for i, c := range conns {
		n := b.N / clients
		if i < b.N%clients {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("bench-%d", i)
			local := make([]time.Duration, 0, n)
			for range n {
				t0 := time.Now()
				if r := c.Do("LOCK " + name); r.Kind != "OK" {
					b.Error(r.Line)
					return
				}
				if r := c.Do("UNLOCK " + name); r.Kind != "OK" {
					b.Error(r.Line)
					return
				}
				local = append(local, time.Since(t0))
			}
			mu.Lock()
			samples = append(samples, local...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "lock+unlock/s")
	report(b, "", samples)
}

// twoBenchAgents starts two agents over three masters and connects a
// client to each.
func twoBenchAgents(b *testing.B) (*agenttest.Conn, *agenttest.Conn, []*redistest.Server) {
	servers := redistest.Start(b, 3)
	c1 := agenttest.Config(b, servers, 15*time.Second)
	c1.AgentID = "a"
	c2 := agenttest.Config(b, servers, 15*time.Second)
	c2.AgentID = "b"
	holder := agenttest.Dial(b, agenttest.Start(b, c1).Config.Socket.Path)
	waiter := agenttest.Dial(b, agenttest.Start(b, c2).Config.Socket.Path)
	return holder, waiter, servers
}

// BenchmarkWakeup measures how long a waiter on one agent takes to get a
// lock after its holder on another agent unlocks it.
func BenchmarkWakeup(b *testing.B) {
	holder, waiter, servers := twoBenchAgents(b)
	samples := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		holder.Do("LOCK wake")
		_, ch := waiter.Send("LOCK wake wait=10s")
		waiter.AwaitWaiters(1)
		awaitSubscribed(b, servers, "wake") // parked on the release channel
		b.StartTimer()
		start := time.Now()
		holder.Raw("u UNLOCK wake\n")
		if r := waiter.Await(ch); r.Kind != "OK" {
			b.Fatal(r.Line)
		}
		samples = append(samples, time.Since(start))
		b.StopTimer()
		waiter.Do("UNLOCK wake")
		b.StartTimer()
	}
	b.StopTimer()
	report(b, "", samples)
}

// BenchmarkFairHandoff measures a fair=true hand-over across agents: how
// long a queued waiter on one agent takes to get the name after its holder
// on another agent unlocks it, against the same with plain LOCKs.
func BenchmarkFairHandoff(b *testing.B) {
	holder, waiter, servers := twoBenchAgents(b)
	for _, opts := range []string{"", " fair=true"} {
		b.Run(map[string]string{"": "plain", " fair=true": "fair"}[opts], func(b *testing.B) {
			samples := make([]time.Duration, 0, b.N)
			for range b.N {
				holder.Do("LOCK handoff" + opts)
				_, ch := waiter.Send("LOCK handoff wait=10s" + opts)
				waiter.AwaitWaiters(1)
				awaitSubscribed(b, servers, "handoff") // queued and parked on the release channel
				start := time.Now()
				holder.Raw("u UNLOCK handoff\n")
				if r := waiter.Await(ch); r.Kind != "OK" {
					b.Fatal(r.Line)
				}
				samples = append(samples, time.Since(start))
				waiter.Do("UNLOCK handoff")
			}
			report(b, "", samples)
		})
	}
}

// BenchmarkBareEvalshaFanout is the floor the agent is measured against: an
// EVALSHA that sets a key fanned out to the same three masters in parallel,
// then one that deletes it: two round trips to a majority, no agent, no
// socket, no protocol.
func BenchmarkBareEvalshaFanout(b *testing.B) {
	servers := redistest.Start(b, 3)
	ctx := context.Background()
	lock := rueidis.NewLuaScript(`return redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) and 1 or 0`)
	unlock := rueidis.NewLuaScript(`return redis.call('DEL', KEYS[1])`)
	var clients []rueidis.Client
	for _, s := range servers {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{s.Addr}, ForceSingleClient: true, DisableCache: true, PipelineMultiplex: -1})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		lock.Exec(ctx, c, []string{"warm"}, []string{"x", "1000"})
		unlock.Exec(ctx, c, []string{"warm"}, nil)
		clients = append(clients, c)
	}
	fanout := func(s *rueidis.Lua, args []string) {
		var wg sync.WaitGroup
		for _, c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.Exec(ctx, c, []string{"bare"}, args)
			}()
		}
		wg.Wait()
	}
	samples := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		fanout(lock, []string{"holder", "15000"})
		fanout(unlock, nil)
		samples = append(samples, time.Since(start))
	}
	b.StopTimer()
	report(b, "", samples)
}

// BenchmarkKinds is one client's LOCK + UNLOCK through the agent for each
// kind of lock, and a 3-name multi-lock against 3 single locks in turn.
func BenchmarkKinds(b *testing.B) {
	servers := redistest.Start(b, 3)
	a := agenttest.Start(b, agenttest.Config(b, servers, 15*time.Second))
	for _, bc := range []struct {
		name          string
		locks, unlock []string
	}{
		{"exclusive", []string{"LOCK k"}, []string{"UNLOCK k"}},
		{"shared", []string{"LOCK k mode=shared"}, []string{"UNLOCK k"}},
		{"semaphore", []string{"LOCK k limit=3"}, []string{"UNLOCK k"}},
		{"three-single", []string{"LOCK a", "LOCK b", "LOCK c"}, []string{"UNLOCK a", "UNLOCK b", "UNLOCK c"}},
		{"three-multi", []string{"LOCK a b c"}, []string{"UNLOCK a b c"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := agenttest.Dial(b, a.Config.Socket.Path)
			samples := make([]time.Duration, 0, b.N)
			for i := 0; i < b.N; i++ {
				start := time.Now()
				for _, l := range append(bc.locks, bc.unlock...) {
					if r := c.Do(l); r.Kind != "OK" {
						b.Fatal(r.Line)
					}
				}
				samples = append(samples, time.Since(start))
			}
			report(b, "", samples)
		})
	}
}
