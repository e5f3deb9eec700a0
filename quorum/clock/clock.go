// Package clock is the time source of lease logic: the real clock, and a fake
// one that tests move by hand.
package clock

import (
	"sort"
	"sync"
	"time"
)

// Clock is the time source of lease logic. Real code uses Real; tests use
// a Fake so validity and renewal are tested without sleeping.
type Clock interface {
	Now() time.Time
	NewTimer(d time.Duration) Timer
	// AfterFunc calls f once the clock has moved on by d: in a goroutine
	// of its own on the real clock, within Advance on a Fake. The
	// Timer's C is not used.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is the part of *time.Timer that lease logic uses.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
	Reset(d time.Duration)
}

// Real is the system clock. Durations between its times use the
// monotonic reading, so wall-clock steps do not move leases.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// NewTimer returns a real timer.
func (Real) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

// AfterFunc returns time.AfterFunc(d, f).
func (Real) AfterFunc(d time.Duration, f func()) Timer { return realTimer{time.AfterFunc(d, f)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time   { return r.t.C }
func (r realTimer) Stop() bool            { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) { r.t.Reset(d) }

// Fake is a Clock that moves only when Advance is called. It is safe for
// concurrent use. Its zero value is not usable; call NewFake.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
	added  chan struct{}
}

// NewFake returns a Fake set to start.
func NewFake(start time.Time) *Fake {
	return &Fake{now: start, added: make(chan struct{}, 1)}
}

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// NewTimer returns a timer that fires when the clock is advanced past d.
func (f *Fake) NewTimer(d time.Duration) Timer {
	t := &fakeTimer{clock: f, c: make(chan time.Time, 1)}
	t.Reset(d)
	return t
}

// Advance moves the clock by d and fires every timer whose time has come, in order.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	now := f.now
	var due []*fakeTimer
	kept := f.timers[:0]
	for _, t := range f.timers {
		if !t.at.After(now) {
			due = append(due, t)
		} else {
			kept = append(kept, t)
		}
	}
	f.timers = kept
	f.mu.Unlock()
	sort.Slice(due, func(i, j int) bool { return due[i].at.Before(due[j].at) })
	for _, t := range due {
		if t.f != nil {
			t.f()
			continue
		}
		select {
		case t.c <- now:
		default:
		}
	}
}

// AfterFunc returns a timer that calls f once the clock has been advanced
// past d, as time.AfterFunc does for the real clock; but f runs within
// Advance, so when Advance returns every function due by then has run
// (and one not due has not). Its C is never sent on.
func (f *Fake) AfterFunc(d time.Duration, fn func()) Timer {
	t := &fakeTimer{clock: f, c: make(chan time.Time, 1), f: fn}
	t.Reset(d)
	return t
}

// Timers returns how many timers are armed: tests wait on it to know that
// the code under test is parked before they advance the clock.
func (f *Fake) Timers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// TimerArmed returns a channel that receives (coalesced) whenever a timer is
// armed.
func (f *Fake) TimerArmed() <-chan struct{} { return f.added }

type fakeTimer struct {
	clock *Fake
	c     chan time.Time
	at    time.Time
	f     func() // for AfterFunc; nil for NewTimer
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool {
	f := t.clock
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, o := range f.timers {
		if o == t {
			f.timers = append(f.timers[:i], f.timers[i+1:]...)
			return true
		}
	}
	return false
}

func (t *fakeTimer) Reset(d time.Duration) {
	t.Stop()
	f := t.clock
	f.mu.Lock()
	t.at = f.now.Add(d)
	f.timers = append(f.timers, t)
	f.mu.Unlock()
	select {
	case f.added <- struct{}{}:
	default:
	}
}
