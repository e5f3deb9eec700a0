package rules

import (
	"math/bits"
	"slices"
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
		stalled time.Duration
		want    bool
	}{
		{"heard from lately and not doubted: trusted", false, 100 * ms, 0, true},
		{"silent three timeouts: paused or dead, as far as a round cares", false, 150 * ms, 0, false},
		{"silent three timeouts of which the round stood stalled one: trusted", false, 150 * ms, 50 * ms, true},
		{"silent four timeouts of which the round stood stalled one: not trusted", false, 200 * ms, 50 * ms, false},
		{"doubted by the probe: not trusted however lately heard", true, 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Trusted(tt.doubted, tt.silent, tt.stalled, 50*ms); got != tt.want {
				t.Fatalf("Trusted = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSettleFence(t *testing.T) {
	cases := []struct {
		name    string
		fences  []int64
		fence   int64
		atFence int
		behind  []int
	}{
		{"a majority in step settles on its fence", []int64{7, 7, 0}, 7, 2, nil},
		{"the highest fence wins and the granting masters below it are behind", []int64{7, 9, 0}, 9, 1, []int{0}},
		{"a master that did not grant is not behind", []int64{0, 5, 3}, 5, 1, []int{2}},
		{"every master in step", []int64{4, 4, 4}, 4, 3, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fence, atFence, behind := SettleFence(tc.fences)
			if fence != tc.fence || atFence != tc.atFence || !slices.Equal(behind, tc.behind) {
				t.Fatalf("SettleFence(%v) = %d, %d, %v; want %d, %d, %v", tc.fences, fence, atFence, behind, tc.fence, tc.atFence, tc.behind)
			}
		})
	}
}

// TestCheckOutcomeEveryAnswer decides a CHECK over every combination of
// masters that record the fence, lack it, or fail, for 3 and 5 masters.
func TestCheckOutcomeEveryAnswer(t *testing.T) {
	for _, n := range []int{3, 5} {
		q := n/2 + 1
		for yes := 0; yes <= n; yes++ {
			for failed := 0; yes+failed <= n; failed++ {
				current, known := CheckOutcome(n, q, yes, failed)
				answered := n - failed
				switch {
				case yes >= q && !(current && known):
					t.Errorf("n=%d yes=%d failed=%d: a majority records it, got %v %v", n, yes, failed, current, known)
				case yes < q && current:
					t.Errorf("n=%d yes=%d failed=%d: current without a majority", n, yes, failed)
				case yes < q && known != (yes+failed < q):
					t.Errorf("n=%d yes=%d failed=%d: known=%v with %d answers (%d silent could make a majority with the yes)", n, yes, failed, known, answered, failed)
				}
			}
		}
	}
}

// TestDecideSlotsEveryAnswer tries every combination of answers from 3 and
// 5 masters (not yet answered, refused or failed, or granted one of three
// slots): a claim is won exactly when one slot has a majority, lost exactly
// when no slot can still reach one, and a round with every answer in is
// never pending.
func TestDecideSlotsEveryAnswer(t *testing.T) {
	const pending, no = -1, 0 // answer kinds besides slots 1..3
	for _, n := range []int{3, 5} {
		q := Majority(n)
		answers := make([]int, n)
		var try func(i int)
		try = func(i int) {
			if i < n {
				for a := pending; a <= 3; a++ {
					answers[i] = a
					try(i + 1)
				}
				return
			}
			granted := map[int]int{}
			refused, waiting := 0, 0
			for _, a := range answers {
				switch a {
				case pending:
					waiting++
				case no:
					refused++
				default:
					granted[a]++
				}
			}
			got, slot := DecideSlots(n, granted, refused)
			want := Pending
			best := 0
			for _, g := range granted {
				best = max(best, g)
			}
			switch {
			case best >= q:
				want = Won
			case best+waiting < q:
				want = Lost
			}
			if got != want || (want == Won && granted[slot] < q) || (waiting == 0 && got == Pending) {
				t.Fatalf("n=%d answers %v: got %v slot %d, want %v", n, answers, got, slot, want)
			}
		}
		try(0)
	}
}

// TestAReadNeverMissesARecordAMajorityHolds: for 3 and 5 masters, every
// set of masters that records a thing (a majority or not) and every set
// that answers a read (a majority at least, as a read needs): the read
// shows it whenever a majority records it, and, with every master heard,
// only then.
func TestAReadNeverMissesARecordAMajorityHolds(t *testing.T) {
	for _, n := range []int{3, 5} {
		q := Majority(n)
		for holds := range 1 << n {
			for answered := range 1 << n {
				if bits.OnesCount(uint(answered)) < q {
					continue
				}
				seen := bits.OnesCount(uint(holds & answered))
				shown := seen >= ReadQuorum(q, n-bits.OnesCount(uint(answered)))
				majority := bits.OnesCount(uint(holds)) >= q
				switch {
				case majority && !shown:
					t.Errorf("n=%d holds=%0*b answered=%0*b: a majority's record missed", n, n, holds, n, answered)
				case answered == 1<<n-1 && shown != majority:
					t.Errorf("n=%d holds=%0*b, every master answered: shown=%v, want %v", n, n, holds, shown, majority)
				}
			}
		}
	}
}

func TestSettleHorizon(t *testing.T) {
	kept := func(left time.Duration) Horizon { return Horizon{Answered: true, Left: left} }
	lost := Horizon{Answered: true, Lost: true, Left: time.Hour} // its left says nothing: it forgot
	silent := Horizon{}
	for _, tc := range []struct {
		name             string
		n                int
		others           []Horizon
		left             time.Duration
		settle, complete bool
	}{
		{"of three, both others kept their data: the later horizon", 3, []Horizon{kept(time.Second), kept(3 * time.Second)}, 3 * time.Second, true, true},
		{"of three, one other is silent: wait, it may hold the only other copy of a tail", 3, []Horizon{kept(time.Second), silent}, 0, false, false},
		{"of three, the other lost its data too: settle with what the one left knows", 3, []Horizon{kept(time.Second), lost}, time.Second, true, false},
		{"of three, every master lost its data: nothing to wait for", 3, []Horizon{lost, lost}, 0, true, false},
		{"of five, three others that kept their data are enough", 5, []Horizon{kept(time.Second), kept(2 * time.Second), silent, kept(0)}, 2 * time.Second, true, true},
		{"of five, two that kept it and one lost: wait for the silent one", 5, []Horizon{kept(time.Second), lost, silent, kept(0)}, 0, false, false},
		{"of five, another lost its data too (a minority): the three left are enough", 5, []Horizon{kept(time.Second), lost, kept(4 * time.Second), kept(0)}, 4 * time.Second, true, true},
		{"of two, the other is needed", 2, []Horizon{silent}, 0, false, false},
		{"of one, there is nobody to ask", 1, nil, 0, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			left, settle, complete := SettleHorizon(tc.n, tc.others)
			if left != tc.left || settle != tc.settle || complete != tc.complete {
				t.Errorf("SettleHorizon = %v, %v, %v; want %v, %v, %v", left, settle, complete, tc.left, tc.settle, tc.complete)
			}
		})
	}
}

func TestMayPlantAndReplant(t *testing.T) {
	cases := []struct {
		name              string
		views             []MarkerView
		mayPlant, replant bool
	}{
		{"an agent that probed nothing yet may not plant", []MarkerView{ViewUnknown, ViewUnknown, ViewUnknown}, false, false},
		{"a majority probed, none with other settings: a new cluster, it may plant", []MarkerView{ViewNone, ViewNone, ViewUnknown}, true, false},
		{"a minority probed may not plant", []MarkerView{ViewNone, ViewUnknown, ViewUnknown}, false, false},
		{"one master with other settings forbids planting without a majority of ours", []MarkerView{ViewNone, ViewOther, ViewNone}, false, false},
		{"a majority of ours plants and re-plants", []MarkerView{ViewOther, ViewOurs, ViewOurs}, true, true},
		{"a majority of others neither plants nor re-plants", []MarkerView{ViewOther, ViewOther, ViewOurs}, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ours, others, probed := MarkerCounts(tc.views)
			if got := MayPlant(ours, others, probed, Majority(len(tc.views))); got != tc.mayPlant {
				t.Errorf("MayPlant = %v, want %v", got, tc.mayPlant)
			}
			if got := Replant(ours, Majority(len(tc.views))); got != tc.replant {
				t.Errorf("Replant = %v, want %v", got, tc.replant)
			}
		})
	}
}

// TestFreeOnMajorityIn: a waiter parks until a majority may have the name
// free, not until the last holder seen is gone: a hold that ended into a
// short tail on two masters of three, while the third (not reached yet by
// the end) still counts the whole lease, is free in the tail's time.
func TestFreeOnMajorityIn(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var out []time.Duration
		for _, x := range v {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	for _, tc := range []struct {
		name         string
		waits        []time.Duration
		free, quorum int
		want         time.Duration
	}{
		{"no busy answer", nil, 0, 2, 0},
		{"held on all three: the second lease to end", ms(2900, 3000, 2950), 0, 2, 2950 * time.Millisecond},
		{"a tail on two, a lease on the third", ms(800, 3000, 790), 0, 2, 800 * time.Millisecond},
		{"one master free: the first busy one to end", ms(3000, 500), 1, 2, 500 * time.Millisecond},
		{"one answer of three (two silent): its wait", ms(700), 0, 2, 700 * time.Millisecond},
		{"five masters, two free", ms(100, 900, 400), 2, 3, 100 * time.Millisecond},
		{"five masters, none free", ms(100, 900, 400, 50, 200), 0, 3, 200 * time.Millisecond},
		{"free masters already a majority (a lost slot): the longest", ms(300, 100), 2, 2, 300 * time.Millisecond},
		{"two busy answers read, the third not waited for: the sooner", ms(6800, 800), 1, 2, 800 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := FreeOnMajorityIn(tc.waits, tc.free, tc.quorum); got != tc.want {
				t.Errorf("FreeOnMajorityIn(%v, %d, %d) = %v, want %v", tc.waits, tc.free, tc.quorum, got, tc.want)
			}
		})
	}
}
