package agent

import (
	"sync"
	"time"

	"github.com/lock-agent/lock-agent/quorum"
)

// funcTimer calls a function once the agent's clock has moved on by a
// duration, as time.AfterFunc does for the real clock: the wait= timers and
// the idle_timeout check. On the real clock it is a time.AfterFunc; on a
// test's quorum.FakeClock, the clock's AfterFunc, which runs the function
// within Advance (so a test knows that what was due has run); on any other
// clock each arming waits in a goroutine of its own until the timer fires
// or is stopped, so a stopped timer leaves nothing behind.
type funcTimer struct {
	real *time.Timer  // on the real clock; the fields below are unused then
	fake quorum.Timer // on a FakeClock; the fields below are unused then

	clock quorum.Clock
	f     func()
	mu    sync.Mutex
	armed quorum.Timer  // nil when not armed
	stop  chan struct{} // closed by Stop and Reset to end the armed wait
}

// afterFunc calls f once clock has moved on by d: in its own goroutine, or
// within Advance on a FakeClock.
func afterFunc(clock quorum.Clock, d time.Duration, f func()) *funcTimer {
	switch c := clock.(type) {
	case quorum.RealClock:
		return &funcTimer{real: time.AfterFunc(d, f)}
	case *quorum.FakeClock:
		return &funcTimer{fake: c.AfterFunc(d, f)}
	}
	t := &funcTimer{clock: clock, f: f}
	t.Reset(d)
	return t
}

// Stop keeps the timer from firing if it has not fired yet. Unlike
// time.Timer's, it says nothing of whether it had: on a fake clock a timer
// that came due may be stopped before its function runs, and no caller
// needs to know.
func (t *funcTimer) Stop() {
	if t.real != nil {
		t.real.Stop()
		return
	}
	if t.fake != nil {
		t.fake.Stop()
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.disarmLocked()
}

func (t *funcTimer) disarmLocked() {
	if t.armed == nil {
		return
	}
	t.armed.Stop()
	close(t.stop)
	t.armed, t.stop = nil, nil
}

// Reset makes the timer fire after d from now, whether or not it had.
func (t *funcTimer) Reset(d time.Duration) {
	if t.real != nil {
		t.real.Reset(d)
		return
	}
	if t.fake != nil {
		t.fake.Reset(d)
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.disarmLocked()
	armed, stop := t.clock.NewTimer(d), make(chan struct{})
	t.armed, t.stop = armed, stop
	go func() {
		select {
		case <-armed.C():
		case <-stop:
			return
		}
		t.mu.Lock()
		current := t.armed == armed
		if current {
			t.armed, t.stop = nil, nil
		}
		t.mu.Unlock()
		if current {
			t.f()
		}
	}()
}
