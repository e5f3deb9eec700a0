package memory

import (
	"context"
	runtimemetrics "runtime/metrics"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

func TestMemoryTrimmerTrimsOnlyOnceABurstIsOver(t *testing.T) {
	m := NewTrimmer(hclog.NewNullLogger())
	const mib = 1 << 20
	for _, c := range []struct {
		name                       string
		trimmed, before, last, now uint64
		want                       bool
	}{
		{"a burst that is over is trimmed", 0, 100 * mib, 100 * mib, 100*mib + 1000, true},
		{"a burst still allocating is not trimmed yet", 0, 90 * mib, 100 * mib, 110 * mib, false},
		{"a burst quiet for one look only is not trimmed yet", 0, 90 * mib, 100 * mib, 100 * mib, false},
		{"a quiet agent that allocated little since the last trim is left alone", 10 * mib, 20 * mib, 20 * mib, 20 * mib, false},
		{"exactly Burst since the last trim, then quiet twice, is a burst", 0, 64 * mib, 64 * mib, 64 * mib, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := m.due(c.trimmed, c.before, c.last, c.now); got != c.want {
				t.Fatalf("due(%d, %d, %d, %d) = %v, want %v", c.trimmed, c.before, c.last, c.now, got, c.want)
			}
		})
	}
}

// residentHeap is what the Go runtime holds mapped and not released to the
// OS: its share of the process's RSS (the race detector's shadow memory,
// which the OS counts too, is not in it).
func residentHeap() uint64 {
	s := []runtimemetrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	runtimemetrics.Read(s)
	return s[0].Value.Uint64() - s[1].Value.Uint64()
}

var burstSink [][]byte

// TestMemoryTrimmerReturnsABurstsMemory makes what a burst of holds leaves:
// a large heap, live while a GC ran, then dropped with no GC since. Go keeps
// it resident until its next GC (forced only every two minutes); the
// trimmer returns it once allocation stops.
//
// The test makes the trimmer's looks: one before the burst (its baseline
// is read by then), none during it, then the two quiet ones after which it
// trims. On its own ticker, in a CI run on a busy host (CPU-starved for
// whole intervals), the trimmer began after part of the burst, or looked
// twice during a stall in it and trimmed half-way: what was left was less
// than a burst and stayed resident ("resident heap 139827496 B ten seconds
// after a burst of 128 MiB ended", three CI runs of three on one machine).
func TestMemoryTrimmerReturnsABurstsMemory(t *testing.T) {
	const size = 128 << 20
	ctx, cancel := context.WithCancel(context.Background())
	looks := make(chan time.Time)
	m := NewTrimmer(hclog.NewNullLogger())
	m.looks = looks
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Run(ctx)
	}()
	defer func() { cancel(); <-done }()
	look := func() { looks <- time.Now() } // returns once the look before it is done
	look()
	// One write per page makes it resident, not just mapped.
	for range size >> 20 {
		b := make([]byte, 1<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		burstSink = append(burstSink, b)
	}
	held := residentHeap()
	burstSink = nil
	look() // the burst's look
	look() // quiet once
	look() // quiet twice: it trims
	look() // the trim is done
	if resident := residentHeap(); resident > held-size*3/4 {
		t.Fatalf("resident heap %d B after a burst of %d MiB ended and two quiet looks (%d MiB while held)", resident, size>>20, held>>20)
	}
}
