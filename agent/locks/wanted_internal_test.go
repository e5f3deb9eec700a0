package locks

import (
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/protocol"
)

// TestWantedPushesAreSpacedPerHold drives the limiter with a fake clock:
// the first push goes, then none until wantedEvery has passed since the
// last one that went.
func TestWantedPushesAreSpacedPerHold(t *testing.T) {
	start := time.Unix(1700000000, 0)
	var l wantedLimit
	for _, step := range []struct {
		name  string
		at    time.Duration
		allow bool
	}{
		{"the first push goes", 0, true},
		{"one right after is held back", time.Millisecond, false},
		{"one just before wantedEvery is held back", wantedEvery - time.Nanosecond, false},
		{"one at wantedEvery goes", wantedEvery, true},
		{"the spacing counts from the last push that went", wantedEvery + 50*time.Millisecond, false},
		{"a much later one goes", 10 * wantedEvery, true},
	} {
		if got := l.allow(start.Add(step.at)); got != step.allow {
			t.Fatalf("%s: allow at +%v = %v", step.name, step.at, got)
		}
	}
}

func TestWhomAWaiterWaitsFor(t *testing.T) {
	exclusive := &Hold{mode: protocol.Exclusive, limit: 1}
	shared := &Hold{mode: protocol.Shared, limit: 1}
	semaphore := &Hold{mode: protocol.Exclusive, limit: 3}
	for _, tc := range []struct {
		name string
		wr   wanter
		h    *Hold
		want bool
	}{
		{"an exclusive waiter waits for an exclusive holder", wanter{limit: 1}, exclusive, true},
		{"an exclusive waiter waits for a shared holder", wanter{limit: 1}, shared, true},
		{"a shared waiter waits for an exclusive holder", wanter{shared: true, limit: 1}, exclusive, true},
		{"a shared waiter does not wait for a shared holder", wanter{shared: true, limit: 1}, shared, false},
		{"another agent's shared waiter does not wait for a shared holder", wanter{shared: true}, shared, false},
		{"another agent's exclusive waiter waits for a shared holder", wanter{}, shared, true},
		{"a semaphore's waiter waits for its holders", wanter{limit: 3}, semaphore, true},
		{"a lock's waiter is refused by a semaphore, not waiting", wanter{limit: 1}, semaphore, false},
		{"another agent's refused waiter waits for a semaphore's holders", wanter{}, semaphore, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.wr.waitsFor(tc.h); got != tc.want {
				t.Fatalf("waitsFor = %v", got)
			}
		})
	}
}
