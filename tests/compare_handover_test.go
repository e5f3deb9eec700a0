package tests

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// The scenarios of BenchmarkCompare in which a name passes from one client
// to another: in strict turns across hosts, to a LOCK that does not wait,
// and to a waiter parked on it.

const (
	// pingPongWindow and pingPongMaxTurns bound the ping-pong scenario.
	pingPongWindow   = 3 * time.Second
	pingPongMaxTurns = 20_000
	// remoteTries is how many names the remote-try scenario tries.
	remoteTries = 300
	// wakeups is how many releases the wake-up scenario times, within
	// wakeWindow; a waiter is left parked wakePark before each.
	wakeups    = 200
	wakeWindow = 8 * time.Second
	wakePark   = 20 * time.Millisecond
)

// benchPingPong: two clients, one on each of two agents (for the floor and
// redsync, two clients), taking one name strictly in turn: each turn is a
// LOCK+UNLOCK, timed from the LOCK sent to the UNLOCK answered. An agent
// that keeps a name it released must still hand it across hosts at once.
func benchPingPong(b *testing.B, c *contender) {
	clients := [2]locker{c.client(b, 0), c.client(b, 1)}
	for turn := range 20 {
		lockCycle(b, clients[turn%2], "ping-pong")
	}
	var samples []time.Duration
	refused := 0
	b.ResetTimer()
	for range b.N {
		end := time.Now().Add(pingPongWindow)
		for turn := 0; turn < pingPongMaxTurns && time.Now().Before(end); turn++ {
			start := time.Now()
			refused += lockCycle(b, clients[turn%2], "ping-pong")
			samples = append(samples, time.Since(start))
		}
	}
	b.StopTimer()
	report(b, "", samples)
	b.ReportMetric(float64(refused), "refused")
}

// benchRemoteTry: a client on one agent locks and unlocks a name twice
// (an agent keeps a name a while once released if it was used again
// within cache_linger: this one it keeps), then a client on the other
// agent tries it at once without waiting (for the agent, wait=0):
// how often that is granted, and how long the try takes. The name is free
// in the masters' eyes, so a user expects it granted.
func benchRemoteTry(b *testing.B, c *contender) {
	owner, other := c.client(b, 0), c.client(b, 1)
	var samples []time.Duration
	tries, granted, refused := 0, 0, 0
	b.ResetTimer()
	for i := range b.N {
		for n := range remoteTries {
			name := fmt.Sprintf("remote-try/%d/%d", i, n)
			lockCycle(b, owner, name)
			lockCycle(b, owner, name)
			start := time.Now()
			ok, err := other.try(name)
			samples = append(samples, time.Since(start))
			tries++
			switch {
			case errors.Is(err, errRefused):
				refused++
			case err != nil:
				b.Fatal(err)
			case ok:
				granted++
				if err := other.unlock(name); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.StopTimer()
	report(b, "", samples)
	b.ReportMetric(100*float64(granted)/float64(tries), "granted-%")
	b.ReportMetric(float64(refused), "refused")
}

// benchWakeup: a waiter (of group waiterGroup) parked on a name held by a
// holder (of holderGroup); the time from the holder's release being sent
// to the waiter's grant being received.
func benchWakeup(b *testing.B, c *contender, holderGroup, waiterGroup int) {
	holder, waiter := c.client(b, holderGroup), c.client(b, waiterGroup)
	lockCycle(b, holder, "wake")
	lockCycle(b, waiter, "wake")
	refused := 0
	var samples []time.Duration
	// The timer runs throughout, so that b.N stays 1 under the default
	// -benchtime too.
	b.ResetTimer()
	for range b.N {
		end := time.Now().Add(wakeWindow)
		for n := 0; n < wakeups && time.Now().Before(end); n++ {
			took, r := wakeOnce(b, c, holder, waiter, waiterGroup)
			samples = append(samples, took)
			refused += r
		}
	}
	b.StopTimer()
	report(b, "", samples)
	b.ReportMetric(float64(refused), "refused")
	b.ReportMetric(0, "ns/op")
}

// wakeOnce times one hand-over of "wake" from holder to waiter, and
// counts the LOCKs refused on the way.
func wakeOnce(b *testing.B, c *contender, holder, waiter locker, waiterGroup int) (time.Duration, int) {
	ctx, cancel := context.WithTimeout(context.Background(), compareLockTimeout)
	defer cancel()
	ok, refused, err := lockAgain(ctx, holder, "wake")
	if !ok || err != nil {
		b.Fatalf("holder: granted %v, %v", ok, err)
	}
	granted := make(chan time.Time, 1)
	waiterRefused := 0
	go func() {
		defer close(granted)
		var ok bool
		var err error
		ok, waiterRefused, err = lockAgain(ctx, waiter, "wake")
		if !ok || err != nil {
			b.Errorf("waiter: granted %v, %v", ok, err)
			return
		}
		granted <- time.Now()
	}()
	if c.parked != nil {
		c.parked(b, waiterGroup)
	}
	time.Sleep(wakePark)
	released := time.Now()
	if err := holder.unlock("wake"); err != nil {
		b.Fatal(err)
	}
	at, ok := <-granted
	if !ok {
		b.FailNow()
	}
	if err := waiter.unlock("wake"); err != nil {
		b.Fatal(err)
	}
	return at.Sub(released), refused + waiterRefused
}
