package telemetry

import (
	"strings"
	"testing"
	"time"
)

func TestHealthNamesTheLoopsThatFellSilent(t *testing.T) {
	tests := []struct {
		name string
		ago  [loops]time.Duration // how long before the check each loop last beat
		want []string             // in the error; nil for healthy
	}{
		{"loops that beat just now are healthy", [loops]time.Duration{0, 0}, nil},
		{"a loop silent for exactly the limit is still healthy", [loops]time.Duration{3 * time.Second, time.Second}, nil},
		{"a silent accept loop is named with how long", [loops]time.Duration{4 * time.Second, 0}, []string{"accept loop silent for 4s"}},
		{"a silent watchdog is named", [loops]time.Duration{0, 10 * time.Second}, []string{"renewal watchdog silent for 10s"}},
		{"every silent loop is named", [loops]time.Duration{5 * time.Second, 6 * time.Second}, []string{"accept loop silent for 5s", "renewal watchdog silent for 6s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := time.Unix(1000, 0)
			h := NewHealth(func() time.Time { return now }, time.Second, 3*time.Second)
			start := now
			for l := range loops {
				now = start.Add(time.Minute - tt.ago[l])
				h.Beat(l)
			}
			now = start.Add(time.Minute)
			err := h.Check()
			if tt.want == nil {
				if err != nil {
					t.Fatalf("unhealthy: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("healthy")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q lacks %q", err, w)
				}
			}
		})
	}
}

func TestHealthBeforeAnyBeatCountsFromTheStart(t *testing.T) {
	now := time.Unix(1000, 0)
	h := NewHealth(func() time.Time { return now }, time.Second, 3*time.Second)
	now = now.Add(2 * time.Second)
	if err := h.Check(); err != nil {
		t.Fatalf("unhealthy 2s after start: %v", err)
	}
	now = now.Add(2 * time.Second)
	if err := h.Check(); err == nil || !strings.Contains(err.Error(), "accept loop") || !strings.Contains(err.Error(), "renewal watchdog") {
		t.Fatalf("4s after start with no beat: %v", err)
	}
}
