package agenttest

import (
	"sync"
	"sync/atomic"
	"time"
)

// StallMeter counts the time this process went unscheduled while it runs:
// a goroutine asks for 1 ms naps, and each nap that ends more than 2 ms
// late adds its lateness. An agent in the test's process keeps its timing
// promises on the time it is given; a test that bounds how soon the agent
// acts adds what the host took from the process meanwhile, so that a
// loaded host makes the bound longer, not the test red.
type StallMeter struct {
	stalled atomic.Int64 // ns
	stop    chan struct{}
	done    sync.WaitGroup
}

// MeasureStalls starts a StallMeter; Stop ends it, and the test's Cleanup
// does too.
func MeasureStalls(t interface{ Cleanup(func()) }) *StallMeter {
	m := &StallMeter{stop: make(chan struct{})}
	m.done.Add(1)
	go func() {
		defer m.done.Done()
		const nap, late = time.Millisecond, 2 * time.Millisecond
		for {
			start := time.Now()
			select {
			case <-m.stop:
				return
			case <-time.After(nap):
			}
			if d := time.Since(start) - nap; d > late {
				m.stalled.Add(int64(d))
			}
		}
	}()
	t.Cleanup(m.Stop)
	return m
}

// Stalled is the time the process went unscheduled so far, as measured.
func (m *StallMeter) Stalled() time.Duration { return time.Duration(m.stalled.Load()) }

// Stop ends the measuring; Stalled keeps its total.
func (m *StallMeter) Stop() {
	select {
	case <-m.stop:
	default:
		close(m.stop)
	}
	m.done.Wait()
}
