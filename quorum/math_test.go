package quorum

import (
	"math/bits"
	"testing"
	"time"
)

func TestValidity(t *testing.T) {
	tests := []struct {
		name    string
		lease   time.Duration
		elapsed time.Duration
		drift   float64
		want    time.Duration
	}{
		{"an instant grant keeps all but drift and slack", 10 * time.Second, 0, 0.01, 10*time.Second - 100*time.Millisecond - 2*time.Millisecond},
		{"elapsed time is subtracted", time.Second, 100 * time.Millisecond, 0.01, 900*time.Millisecond - 10*time.Millisecond - 2*time.Millisecond},
		{"zero drift leaves only the slack", time.Second, 0, 0, time.Second - 2*time.Millisecond},
		{"a grant slower than its lease is invalid", time.Second, 2 * time.Second, 0.01, -time.Second - 12*time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Validity(tt.lease, tt.elapsed, tt.drift); got != tt.want {
				t.Fatalf("Validity = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestMajority(t *testing.T) {
	for n, want := range map[int]int{1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 7: 4} {
		if got := Majority(n); got != want {
			t.Errorf("Majority(%d) = %d, want %d", n, got, want)
		}
	}
}

// TestDecideEveryFailureMask walks every combination of failed masters for
// n = 1..7 and checks that the round is won exactly when a majority is up,
// and that no early decision ever contradicts the final one.
func TestDecideEveryFailureMask(t *testing.T) {
	for n := 1; n <= 7; n++ {
		for mask := range 1 << n {
			failed := bits.OnesCount(uint(mask))
			want := Lost
			if n-failed >= Majority(n) {
				want = Won
			}
			yes, no := 0, 0
			decided := Pending
			for i := range n {
				if mask&(1<<i) != 0 {
					no++
				} else {
					yes++
				}
				if o := Decide(n, yes, no); o != Pending {
					if decided != Pending && decided != o {
						t.Fatalf("n=%d mask=%b: flipped from %v to %v", n, mask, decided, o)
					}
					decided = o
				}
			}
			if decided != want {
				t.Fatalf("n=%d mask=%b: decided %v, want %v", n, mask, decided, want)
			}
		}
	}
}

func TestFakeClockFiresInOrder(t *testing.T) {
	c := NewFakeClock(time.Unix(0, 0))
	a := c.NewTimer(2 * time.Second)
	b := c.NewTimer(time.Second)
	c.Advance(1500 * time.Millisecond)
	select {
	case <-b.C():
	default:
		t.Fatal("1s timer did not fire at 1.5s")
	}
	select {
	case <-a.C():
		t.Fatal("2s timer fired at 1.5s")
	default:
	}
	if a.Stop() != true || c.Timers() != 0 {
		t.Fatal("Stop of an armed timer must report true and disarm it")
	}
}

func TestOnMajority(t *testing.T) {
	tests := []struct {
		name   string
		counts []int
		quorum int
		want   int
	}{
		{"two of three answers agree on the lower", []int{3, 2}, 2, 2},
		{"one master ahead is not a majority", []int{2, 3, 2}, 2, 2},
		{"two ahead of a lagging one", []int{3, 1, 3}, 2, 3},
		{"fewer answers than a quorum count nothing", []int{5}, 2, 0},
		{"five masters, three needed", []int{4, 1, 4, 2, 4}, 3, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := OnMajority(tt.counts, tt.quorum); got != tt.want {
				t.Fatalf("OnMajority(%v, %d) = %d, want %d", tt.counts, tt.quorum, got, tt.want)
			}
		})
	}
}

func TestRTT(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name    string
		answers []time.Duration
		want    RTT
	}{
		{"no answer yet is no estimate", nil, RTT{}},
		{"the first answer sets the mean and half of it as deviation", []time.Duration{8 * ms}, RTT{8 * ms, 4 * ms}},
		{"a steady master's deviation shrinks", []time.Duration{8 * ms, 8 * ms}, RTT{8 * ms, 3 * ms}},
		{"a slow answer moves the mean an eighth and the deviation a quarter", []time.Duration{8 * ms, 88 * ms}, RTT{18 * ms, 23 * ms}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r RTT
			for _, d := range tt.answers {
				r = r.Add(d)
			}
			if r != tt.want {
				t.Fatalf("RTT = %+v, want %+v", r, tt.want)
			}
		})
	}
}

func TestRTTTimeout(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name string
		rtt  RTT
		want time.Duration
	}{
		{"a fast master's timeout is the floor (master_timeout)", RTT{ms, ms / 2}, 50 * ms},
		{"a slow one's is its mean and four deviations", RTT{40 * ms, 20 * ms}, 120 * ms},
		{"never over the ceiling", RTT{2000 * ms, 500 * ms}, 1000 * ms},
		{"no estimate is the floor", RTT{}, 50 * ms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.rtt.Timeout(50*ms, 1000*ms); got != tt.want {
				t.Fatalf("Timeout = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPatience(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name    string
		waited  time.Duration
		late    time.Duration
		trusted int
		want    time.Duration
	}{
		{"a trusted silent master is waited for one more step", 50 * ms, 0, 1, 100 * ms},
		{"and again, up to the budget", 980 * ms, 0, 2, 1000 * ms},
		{"not past the budget", 1000 * ms, 0, 1, 0},
		{"masters no longer trusted are waited for no more", 50 * ms, 0, 0, 0},
		{"a round stalled itself waits one more step, trusted or not", 90 * ms, 40 * ms, 0, 140 * ms},
		{"a timer late by half a step is not a stall", 75 * ms, 25 * ms, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Patience(tt.waited, tt.late, 50*ms, 1000*ms, tt.trusted); got != tt.want {
				t.Fatalf("Patience = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestTrusted(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name    string
		doubted bool
		silent  time.Duration
		want    bool
	}{
		{"heard from lately and not doubted: trusted", false, 100 * ms, true},
		{"silent three timeouts: paused or dead, as far as a round cares", false, 150 * ms, false},
		{"doubted by the probe: not trusted however lately heard", true, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Trusted(tt.doubted, tt.silent, 50*ms); got != tt.want {
				t.Fatalf("Trusted = %v, want %v", got, tt.want)
			}
		})
	}
}
