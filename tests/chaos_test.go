package tests

import (
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// TestNoOverlapWhileMastersFail is the product's promise under faults:
// clients on two agents contend for one name while masters are paused and
// resumed at random, sometimes two at once so that holds are lost. A hold
// lasts from its OK until its client unlocks it or receives its LOST; on
// this process's clock no two holds may overlap, and fences grow in grant
// order.
func TestNoOverlapWhileMastersFail(t *testing.T) {
	t.Parallel()
	a, b, servers := twoAgents(t, time.Second)
	const clients = 6
	stop := time.Now().Add(10 * time.Second)

	var longHold atomic.Bool // a client is in a long hold: the moment to cut the quorum
	var chaos sync.WaitGroup
	chaos.Add(1)
	go func() {
		defer chaos.Done()
		rng := rand.New(rand.NewPCG(1, 2))
		for time.Now().Before(stop) {
			// One master down: nothing may be lost.
			i := rng.IntN(len(servers))
			redistest.PauseFor(time.Duration(200+rng.IntN(400))*time.Millisecond, servers, i)
			time.Sleep(time.Duration(200+rng.IntN(300)) * time.Millisecond)
			// Two down while a long hold is in progress, for longer than its
			// validity: it must be LOST before anyone else is granted the name.
			pollFor(2*time.Second, 10*time.Millisecond, longHold.Load)
			redistest.PauseFor(1200*time.Millisecond, servers, rng.Perm(len(servers))[:2]...)
			time.Sleep(time.Duration(200+rng.IntN(300)) * time.Millisecond)
		}
	}()

	var mu sync.Mutex
	var held []interval
	lost, noQuorum := 0, 0
	var wg sync.WaitGroup
	for i := range clients {
		agent := a
		if i%2 == 1 {
			agent = b
		}
		c := agenttest.Dial(t, agent.Config.Socket.Path)
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			for time.Now().Before(stop) {
				r := c.Do("LOCK chaos wait=500ms")
				if r.Kind != "OK" {
					if r.Code == "NO_QUORUM" {
						mu.Lock()
						noQuorum++
						mu.Unlock()
						time.Sleep(20 * time.Millisecond)
					}
					continue
				}
				iv := interval{start: time.Now(), fence: r.Int("fence"), who: i}
				hold, long := holdFor(rng)
				if long {
					longHold.Store(true)
				}
				select {
				case p := <-c.Pushes():
					iv.end = time.Now()
					if !strings.HasPrefix(p, "* LOST chaos") {
						t.Errorf("client %d: unexpected push %q", i, p)
					}
					mu.Lock()
					lost++
					mu.Unlock()
				case <-time.After(hold):
					iv.end = time.Now()
					c.Do("UNLOCK chaos") // NOT_HELD if the LOST is racing it: the hold ended either way
				}
				longHold.Store(false)
				mu.Lock()
				held = append(held, iv)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	chaos.Wait()
	sort.Slice(held, func(i, j int) bool { return held[i].start.Before(held[j].start) })
	for i := 1; i < len(held); i++ {
		prev, cur := held[i-1], held[i]
		if cur.start.Before(prev.end) {
			t.Fatalf("overlap: client %d held fence %d until %v, client %d got fence %d at %v",
				prev.who, prev.fence, prev.end, cur.who, cur.fence, cur.start)
		}
		if cur.fence <= prev.fence {
			t.Fatalf("fence %d granted after %d", cur.fence, prev.fence)
		}
	}
	if len(held) < 5 || lost == 0 {
		t.Fatalf("only %d grants and %d losses under chaos: the faults did not bite", len(held), lost)
	}
	t.Logf("%d grants, %d lost, %d NO_QUORUM answers under random master pauses; no overlap", len(held), lost, noQuorum)
}

// holdFor is how long a chaos client keeps a lock: half the time briefly,
// half the time for 3s, longer than a hold can survive two masters down.
func holdFor(rng *rand.Rand) (time.Duration, bool) {
	if rng.IntN(2) == 0 {
		return 3 * time.Second, true
	}
	return time.Duration(rng.IntN(100)) * time.Millisecond, false
}
