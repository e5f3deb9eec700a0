package locks

import "testing"

func TestLeaderPush(t *testing.T) {
	none := leaderState{}
	term := func(fence int64, value string) leaderState {
		return leaderState{held: true, fence: fence, value: value, agent: "a"}
	}
	tests := []struct {
		name  string
		known bool
		last  leaderState
		top   int64
		read  leaderState
		want  bool
	}{
		{"the first read is pushed, none too", false, none, 0, none, true},
		{"the first read of a term is pushed", false, none, 0, term(5, "x"), true},
		{"a newer term is pushed", true, term(5, "x"), 5, term(6, "y"), true},
		{"the same term and value again is not", true, term(5, "x"), 5, term(5, "x"), false},
		{"a new value of the same term is", true, term(5, "x"), 5, term(5, "y"), true},
		{"an older term after a newer one never is", true, term(6, "y"), 6, term(5, "x"), false},
		{"an older term after none never is", true, none, 6, term(5, "x"), false},
		{"none after a term is", true, term(5, "x"), 5, none, true},
		{"none again is not", true, none, 5, none, false},
		{"the last term again after none never is", true, none, 5, term(5, "x"), false},
		{"nor with a new value", true, none, 5, term(5, "y"), false},
		{"a newer term after none is", true, none, 5, term(6, "y"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := leaderPush(tt.known, tt.last, tt.top, tt.read); got != tt.want {
				t.Fatalf("leaderPush = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestServes(t *testing.T) {
	tests := []struct {
		name           string
		joined, read   uint64
		behind, serves bool
	}{
		{"the first read of a new observation serves its first session", 0, 1, false, true},
		{"a read begun before the OBSERVE arrived does not", 3, 3, false, false},
		{"nor one begun earlier still", 3, 2, false, false},
		{"a read begun after it does", 3, 4, false, true},
		{"unless it lags behind what was pushed", 3, 4, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := serves(tt.joined, tt.read, tt.behind); got != tt.serves {
				t.Fatalf("serves(%d, %d, %v) = %v, want %v", tt.joined, tt.read, tt.behind, got, tt.serves)
			}
		})
	}
}
