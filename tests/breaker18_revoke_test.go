package tests

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/agenttest"
)

// TestBreaker18RevokeDuringACohortRun: ten clients of one agent take turns
// on a name (the agent passes it among them), three of another contend,
// and an operator on the second agent REVOKEs the name again and again.
// A revocation races hand-overs, UNLOCKs and renewals: no two holds that
// ended by UNLOCK overlap, their fences grow in grant order, and a client
// that heard LOST for its hold holds nothing (its next LOCK is a new hold,
// not a re-entry). (That the LOST comes before the next grant is
// TestRevokeTellsTheHolderBeforeAnotherAgentIsGranted's.)
func TestBreaker18RevokeDuringACohortRun(t *testing.T) {
	t.Parallel()
	const local, remote = 10, 3
	a, b, _ := twoAgents(t, time.Second)
	run := &revokeChurn{done: make(chan struct{})}
	for i := range local + remote {
		path := a.Config.Socket.Path
		if i >= local {
			path = b.Config.Socket.Path
		}
		c := agenttest.Dial(t, path)
		run.wg.Add(1)
		go func() {
			defer run.wg.Done()
			run.turns(t, c, i)
		}()
	}
	run.awaitGrants(t, 50)
	op := agenttest.Dial(t, b.Config.Socket.Path)
	revoked, revokes := int64(0), 0
	for end := time.Now().Add(soak(3*time.Second, 20*time.Second)); time.Now().Before(end); revokes++ {
		r := op.Do("REVOKE rv reason=breaker")
		if r.Code == "NO_QUORUM" { // the masters' answers timed out on a loaded host: says nothing of revocation
			continue
		}
		if r.Kind != "OK" {
			t.Fatalf("REVOKE: %q", r.Line)
		}
		revoked += r.Int("n")
	}
	close(run.done)
	run.wg.Wait()
	held := run.sorted()
	clean := checkCleanHolds(t, held)
	t.Logf("%d grants (%d ended by UNLOCK), %d REVOKEs revoked %d holds, %d told LOST", len(held), clean, revokes, revoked, run.lost.Load())
	if revoked == 0 || run.lost.Load() == 0 {
		t.Fatal("no REVOKE ended a hold")
	}
}

// revokeChurn is clients taking turns on "rv", as churn, but that match a
// LOST to their hold by its fence: a LOST of a hold that an UNLOCK ended
// meanwhile may arrive after that UNLOCK's answer.
type revokeChurn struct {
	done   chan struct{}
	wg     sync.WaitGroup
	grants atomic.Int64
	lost   atomic.Int64
	mu     sync.Mutex
	held   []revokeInterval
}

type revokeInterval struct {
	interval
	lost bool
}

func (cr *revokeChurn) turns(t *testing.T, c *agenttest.Conn, who int) {
	hold := time.Duration(who%3) * time.Millisecond
	for {
		select {
		case <-cr.done:
			return
		default:
		}
		r := c.Do("LOCK rv wait=2s")
		if r.Kind != "OK" {
			continue // BUSY
		}
		iv := revokeInterval{interval: interval{start: time.Now(), fence: r.Int("fence"), who: who}}
		if n := r.Int("count"); n != 1 {
			t.Errorf("client %d: LOCK granted fence %d with count=%d: a hold it was told was LOST is still its own", who, iv.fence, n)
			return
		}
		cr.grants.Add(1)
		iv.end, iv.lost = cr.awaitEnd(c, iv.fence, hold)
		cr.mu.Lock()
		cr.held = append(cr.held, iv)
		cr.mu.Unlock()
	}
}

// awaitEnd holds fence for hold, or until its LOST, and returns when the
// client stopped relying on it.
func (cr *revokeChurn) awaitEnd(c *agenttest.Conn, fence int64, hold time.Duration) (time.Time, bool) {
	timer := time.NewTimer(hold)
	defer timer.Stop()
	for {
		select {
		case p := <-c.Pushes():
			if strings.HasPrefix(p, "* LOST rv ") && strings.Contains(p, " fence="+strconv.FormatInt(fence, 10)+" ") {
				cr.lost.Add(1)
				return time.Now(), true
			}
		case <-timer.C:
			end := time.Now()
			// NOT_HELD if a LOST raced the timer: the hold ended when its
			// LOST was pushed, at some time before.
			return end, c.Do("UNLOCK rv").Kind != "OK"
		}
	}
}

// checkCleanHolds checks the holds that ended by an UNLOCK answered OK,
// in the order they began, and returns how many there are. Each is
// exact: its client held it from before start (the OK was read then) to
// after end (its UNLOCK was sent then), so two that overlap were held at
// once, and two that do not were granted in that order and must have
// fences in it. A hold that ended by LOST ended when the agent pushed it,
// some time before its client read it: it is not checked so.
func checkCleanHolds(t *testing.T, held []revokeInterval) int {
	t.Helper()
	var clean []revokeInterval
	for _, h := range held {
		if !h.lost {
			clean = append(clean, h)
		}
	}
	for i := 1; i < len(clean); i++ {
		prev, cur := clean[i-1], clean[i]
		if cur.start.Before(prev.end) {
			t.Errorf("overlap: client %d held fence %d until %v, client %d got fence %d at %v",
				prev.who, prev.fence, prev.end, cur.who, cur.fence, cur.start)
		}
		if cur.fence <= prev.fence {
			t.Errorf("fence %d (client %d) granted after %d (client %d)", cur.fence, cur.who, prev.fence, prev.who)
		}
	}
	return len(clean)
}

func (cr *revokeChurn) awaitGrants(t *testing.T, n int64) {
	t.Helper()
	var got int64
	lockagenttest.Eventually(t, 20*time.Second, func() bool { got = cr.grants.Load(); return got >= n }, "only %d grants in 20s", &got)
}

func (cr *revokeChurn) sorted() []revokeInterval {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	held := append([]revokeInterval(nil), cr.held...)
	for i := 1; i < len(held); i++ {
		for j := i; j > 0 && held[j].start.Before(held[j-1].start); j-- {
			held[j], held[j-1] = held[j-1], held[j]
		}
	}
	return held
}
