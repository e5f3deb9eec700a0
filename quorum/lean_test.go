package quorum

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/redistest"
)

func TestWhichRequestsAreLean(t *testing.T) {
	lock := req("n", "h")
	with := func(change func(*AcquireRequest)) AcquireRequest {
		r := lock
		change(&r)
		return r
	}
	for _, tc := range []struct {
		name string
		req  AcquireRequest
		lean bool
	}{
		{"a plain exclusive lock is lean", lock, true},
		{"a shared lock is lean", with(func(r *AcquireRequest) { r.Claim.Mode = Shared }), true},
		{"a lock of limit 1 spelled out is lean", with(func(r *AcquireRequest) { r.Claim.Limit = 1 }), true},
		{"a fence block of 1 is lean", with(func(r *AcquireRequest) { r.FenceBlock = 1 }), true},
		{"a semaphore is not", with(func(r *AcquireRequest) { r.Claim.Limit = 2 }), false},
		{"a lock with a value is not", with(func(r *AcquireRequest) { r.Who.Value = "v" }), false},
		{"a claim with a queue entry is not", with(func(r *AcquireRequest) { r.Entry = &Entry{} }), false},
		{"a grant of a fence block is not", with(func(r *AcquireRequest) { r.FenceBlock = 3 }), false},
		{"a hold with a delay is not", with(func(r *AcquireRequest) { r.Tail.Delay = time.Second }), false},
		{"a hold with a min_hold is not", with(func(r *AcquireRequest) { r.Tail.MinHold = time.Second }), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.req.lean(); got != tc.lean {
				t.Errorf("lean() = %v, want %v", got, tc.lean)
			}
		})
	}
}

// TestALeanLockOfAFreshNameCostsAMasterFourteenCalls counts, with MONITOR,
// what one master runs for a LOCK+UNLOCK cycle of a fresh name: the lean
// script and the release, 14 calls, counting the scripts' own (the
// general script took 17); and reads the record the lean script left, a
// lock's 6 fields (the general script wrote 10), leased as the set is,
// which WHO reads as the exclusive or shared lock it is.
func TestALeanLockOfAFreshNameCostsAMasterFourteenCalls(t *testing.T) {
	servers := redistest.Start(t, 3)
	cfg := testConfig(t, servers, time.Second, true)
	cfg.ProbeInterval = time.Hour // no probe among the commands counted
	c := startCluster(t, cfg)
	ctx := context.Background()
	// The first call of a script on a master may be its EVAL (see
	// scripts.Script.AfterRestart): a cycle before the counted ones.
	if _, err := acquire(ctx, c, req("warm", "h")); err != nil {
		t.Fatal(err)
	}
	c.Release(ctx, "warm", "h")
	for _, tc := range []struct {
		name   string
		claim  Claim
		fields []string
	}{
		{"exclusive", Claim{}, []string{"agent", "fence", "owner", "pid", "since", "uid"}},
		{"shared", Claim{Mode: Shared}, []string{"agent", "fence", "mode", "owner", "pid", "since", "uid"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := map[string]int{"EVALSHA": 2, "EXISTS": 1, "HMGET": 1, "TIME": 1, "SET": 2, "HSET": 1, "PEXPIRE": 2,
				"SADD": 1, "DEL": 1, "SREM": 1, "PUBLISH": 1}
			var calls map[string]int
			var seen []string
			// A grant whose masters' clocks straddle a whole second gives
			// them different first fences, and a write-back to the lower;
			// and a master the warm-up cycle did not reach runs its first
			// script as EVAL: then tried again, on another fresh name.
			for try := range 4 {
				calls, seen = cycleCalls(t, c, servers, claimReq(fmt.Sprintf("fresh-%s-%d", tc.name, try), "h", tc.claim))
				if calls["EVALSHA"] <= 2 && calls["EVAL"] == 0 {
					break
				}
			}
			if !maps.Equal(calls, want) {
				t.Errorf("a master ran %v for a cycle, want %v:\n%s", calls, want, strings.Join(seen, "\n"))
			}

			name := "read-" + tc.name
			g, err := acquire(ctx, c, claimReq(name, "h", tc.claim))
			if err != nil {
				t.Fatal(err)
			}
			record := c.keys.Holder(name, "h")
			m := awaitField(t, servers, record, "fence") // a majority holds it, perhaps not yet all
			fields, err := m.Array("HKEYS", record)
			if err != nil {
				t.Fatal(err)
			}
			if slices.Sort(fields); !slices.Equal(fields, tc.fields) {
				t.Errorf("the record has %v, want %v", fields, tc.fields)
			}
			for _, key := range []string{record, c.keys.Set(name)} { // leased as the grant's lease
				reply, err := m.Do("PTTL", key)
				if ttl, _ := strconv.Atoi(reply); err != nil || ttl <= 0 || ttl > 5000 {
					t.Errorf("PTTL %s = %s %v, want the lease's 5000 ms or less", key, reply, err)
				}
			}
			who, err := c.Who(ctx, name)
			if err != nil || len(who) != 1 || who[0].Record.Claim != (Claim{Mode: tc.claim.mode(), Limit: 1}) || who[0].Record.Fence != g.Fence {
				t.Errorf("who = %+v %v, want one %s lock with fence %d", who, err, tc.claim.mode(), g.Fence)
			}
			c.Release(ctx, name, "h")
		})
	}
}

// cycleCalls acquires and releases r on c, and returns the commands one
// master ran for it, by name, from its MONITOR (the scripts and the
// commands they ran; nothing else runs scripts meanwhile), and as it
// showed them; a script is r's if a key of r's name is among its
// arguments. The master is the first whose release published: the grant
// needs a majority only, so a third master may see its acquire cancelled
// or arrive after the release's tombstone, and never hold the name.
func cycleCalls(t *testing.T, c *Cluster, servers []*redistest.Server, r AcquireRequest) (map[string]int, []string) {
	t.Helper()
	var mu sync.Mutex
	calls := make([]map[string]int, len(servers))
	seen := make([][]string, len(servers))
	chosen := -1
	released := make(chan struct{})
	for i, m := range servers {
		calls[i] = map[string]int{}
		ours := false // whether the last script called was for r's name
		m.Monitor(func(cmd redistest.Command) bool {
			verb := strings.ToUpper(cmd.Args[0])
			mu.Lock()
			defer mu.Unlock()
			if chosen >= 0 {
				return false
			}
			if !cmd.Script && strings.HasPrefix(verb, "EVAL") {
				// An earlier cycle's round lands on its last master
				// in the background: its scripts are not counted.
				ours = slices.ContainsFunc(cmd.Args, func(a string) bool { return strings.Contains(a, "{"+r.Name+"}") })
			}
			if !ours || !cmd.Script && !strings.HasPrefix(verb, "EVAL") {
				return true
			}
			calls[i][verb]++
			seen[i] = append(seen[i], strings.Join(cmd.Args, " "))
			if verb == "PUBLISH" { // the release's last
				chosen = i
				close(released)
				return false
			}
			return true
		})
	}
	ctx := context.Background()
	if _, err := acquire(ctx, c, r); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Release(ctx, r.Name, r.Holder); err != nil {
		t.Fatal(err)
	}
	select {
	case <-released:
	case <-time.After(5 * time.Second):
		t.Fatal("the release never published on any master")
	}
	mu.Lock()
	defer mu.Unlock()
	return calls[chosen], seen[chosen]
}

// awaitField waits until one of servers has field in its hash key, and
// returns that server.
func awaitField(t *testing.T, servers []*redistest.Server, key, field string) *redistest.Server {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		for _, s := range servers {
			if n, err := s.Do("HEXISTS", key, field); err == nil && n == "1" {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no master has %s in %s", field, key)
		}
		time.Sleep(5 * time.Millisecond) // polled: a master sends no event
	}
}
