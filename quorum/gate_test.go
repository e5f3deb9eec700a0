package quorum

import (
	"context"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/redistest"
	"github.com/lock-agent/lock-agent/quorum/rules"
)

// TestAQuarantineOutlastsTheTailsTheOthersKeep: a master that restarts
// empty while a tail stands elsewhere sits out until the tail ends, not
// one lease: the others' horizons say how long. With no tail it sits out
// its lease, as before.
func TestAQuarantineOutlastsTheTailsTheOthersKeep(t *testing.T) {
	const quarantine, lease, delay = 500 * time.Millisecond, 300 * time.Millisecond, 3 * time.Second
	for _, tc := range []struct {
		name            string
		tail            Tail
		end             bool // the hold's agent ends it uncleanly; else the agent dies
		atLeast, atMost time.Duration
	}{
		{"a dead agent's record with a delay: its lease and the delay", Tail{Delay: delay}, false, delay - time.Second, lease + delay + time.Second},
		{"a tail left by an unclean end: the delay", Tail{Delay: delay}, true, delay - time.Second, delay + time.Second},
		{"a hold with min_hold: what is left of it", Tail{MinHold: 2 * delay}, false, 2*delay - time.Second, 2*delay + time.Second},
		{"no tail: one lease", Tail{}, false, 0, quarantine},
	} {
		t.Run(tc.name, func(t *testing.T) {
			servers := redistest.Start(t, 3)
			c := newCluster(t, servers, quarantine)
			ctx := context.Background()
			r := req("horizon", "h1")
			r.Lease, r.Tail = lease, tc.tail
			if _, err := acquire(ctx, c, r); err != nil {
				t.Fatal(err)
			}
			if _, err := c.End(ctx, "horizon", "h1", false); tc.end && err != nil {
				t.Fatal(err)
			}
			servers[0].Restart()
			var left time.Duration
			waitStates(t, c, func(st []MasterStatus) bool {
				left = st[0].QuarantineLeft
				pending, _ := servers[0].Do("HGET", "t:epoch", "tails")
				return st[0].State == StateQuarantined && !st[0].Unplanted && pending == "" && left >= tc.atLeast
			})
			if left > tc.atMost {
				t.Errorf("quarantine left %v, want at most %v", left, tc.atMost)
			}
		})
	}
}

// TestAPendingMasterWaitsForTheOthersHorizons: with another master silent,
// the one that lost its data cannot know whether the silent one kept the
// only other copy of a tail: it stays pending (quarantined for its lease
// meanwhile) and is settled once the silent one answers.
func TestAPendingMasterWaitsForTheOthersHorizons(t *testing.T) {
	const quarantine, delay = 4 * time.Second, 6 * time.Second
	servers := redistest.Start(t, 3)
	c := newCluster(t, servers, quarantine)
	ctx := context.Background()
	r := req("silent", "h1")
	r.Lease, r.Tail = 300*time.Millisecond, Tail{Delay: delay}
	if _, err := acquire(ctx, c, r); err != nil {
		t.Fatal(err)
	}
	servers[2].Pause()
	defer servers[2].Resume()
	servers[0].Restart()
	waitStates(t, c, func(st []MasterStatus) bool {
		return st[0].State == StateQuarantined && !st[0].Unplanted && st[2].State == StateDown
	})
	if pending, _ := servers[0].Do("HGET", "t:epoch", "tails"); pending != "pending" {
		t.Fatalf("settled (tails=%q) while a master that may keep a tail was silent", pending)
	}
	if left := c.Status()[0].QuarantineLeft; left > quarantine {
		t.Fatalf("quarantine left %v while pending, want its lease-long one", left)
	}
	servers[2].Resume()
	waitStates(t, c, func(st []MasterStatus) bool {
		pending, _ := servers[0].Do("HGET", "t:epoch", "tails")
		return pending == "" && st[0].QuarantineLeft > quarantine
	})
}

func TestClassifyMarker(t *testing.T) {
	cases := []struct {
		name     string
		refusal  error
		recorded string
		want     rules.MarkerView
	}{
		{"a marker recording our settings", nil, "lease=1s", rules.ViewOurs},
		{"a marker recording none", nil, "", rules.ViewNone},
		{"a master with no marker we may plant", ErrUnplanted, "", rules.ViewNone},
		{"a marker recording others", &SettingsError{Recorded: Settings{{"lease", "2s"}}}, "lease=2s", rules.ViewOther},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ClassifyMarker(tc.refusal, tc.recorded, "lease=1s"); got != tc.want {
				t.Fatalf("ClassifyMarker = %v, want %v", got, tc.want)
			}
		})
	}
}
