package systemd

import (
	"errors"
	"testing"
)

func TestStatusOf(t *testing.T) {
	up := Stats{Masters: 3, MastersUp: 3, Quorum: 2, Sessions: 4, Holds: 5, Waiters: 6}
	down := Stats{Masters: 3, MastersUp: 1, Quorum: 2}
	wedged := errors.New("accept loop silent for 4s")
	tests := []struct {
		name      string
		stats     Stats
		unhealthy error
		want      string
	}{
		{"a quorum is said with the counts", up, nil, "quorum: 3/3 masters up (2 needed); sessions=4 holds=5 waiters=6"},
		{"too few masters up is no quorum", down, nil, "no quorum: 1/3 masters up (2 needed); sessions=0 holds=0 waiters=0"},
		{"a wedged loop comes first", up, wedged, "unhealthy: accept loop silent for 4s; quorum: 3/3 masters up (2 needed); sessions=4 holds=5 waiters=6"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := statusOf(tt.stats, tt.unhealthy).text; got != tt.want {
				t.Errorf("STATUS=%s\nwant STATUS=%s", got, tt.want)
			}
		})
	}
	// Only the masters up and the health are urgent; the counts wait.
	busier := up
	busier.Holds++
	if statusOf(up, nil).urgent != statusOf(busier, nil).urgent {
		t.Error("a change of the counts alone is urgent")
	}
	if statusOf(up, nil).urgent == statusOf(down, nil).urgent || statusOf(up, nil).urgent == statusOf(up, wedged).urgent {
		t.Error("a change of the masters up or of the health is not urgent")
	}
}
