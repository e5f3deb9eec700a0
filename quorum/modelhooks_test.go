package quorum

import (
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/quorum/rules"
	"github.com/lock-agent/lock-agent/quorum/scripts"
)

// TestModelCallsCarryTheModelsPlantDecision checks that the model hooks
// put the gate argument where the gate reads it (after the epoch argument)
// and that it carries the model agent's may-plant decision, not the
// Cluster's (which never probed, so may not plant).
func TestModelCallsCarryTheModelsPlantDecision(t *testing.T) {
	c, err := New(Config{Masters: []MasterConfig{{Name: "a"}, {Name: "b"}, {Name: "c"}}, KeyPrefix: "m:",
		Quarantine: 400 * time.Millisecond, Settings: Settings{{"lease", "300ms"}}})
	if err != nil {
		t.Fatal(err)
	}
	req := AcquireRequest{Name: "n", Holder: "h", Lease: time.Second}
	for _, view := range []bool{true, false} {
		want := c.gateArg(view)
		calls := map[string]struct {
			call    ScriptCall
			gateArg int
		}{
			"acquire": {c.ModelAcquire(0, req, view), scripts.Acquire.GateArg},
			"renew":   {c.ModelRenew(0, time.Second, []RenewKey{{Name: "n", Holder: "h"}}, view), scripts.Renew.GateArg},
			"repair":  {c.ModelRepair(0, time.Second, RenewKey{Name: "n", Holder: "h"}, view), scripts.Repair.GateArg},
			"probe":   {c.ModelProbe(0, view, false), scripts.Marker.GateArg},
		}
		for name, k := range calls {
			if got := k.call.Args[k.gateArg+1]; got != want {
				t.Errorf("%s with may-plant %v: gate argument %q, want %q", name, view, got, want)
			}
		}
	}
	if c.gateArgs()[1] != c.gateArg(false) {
		t.Fatalf("the Cluster's own gate argument is not gateArg's: %q", c.gateArgs()[1])
	}
}

func TestModelProbeView(t *testing.T) {
	c, err := New(Config{Masters: []MasterConfig{{Name: "a"}}, Settings: Settings{{"lease", "300ms"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		recorded, refusal string
		want              rules.MarkerView
		ok                bool
	}{
		{"lease=300ms", "", rules.ViewOurs, true},
		{"lease=300ms", "REPLANTED lease=1s", rules.ViewOurs, true},
		{"lease=1s", "SETTINGS lease=1s", rules.ViewOther, true},
		{"", "UNPLANTED", rules.ViewNone, true},
		{"", "ERR something else", rules.ViewUnknown, false},
	} {
		got, ok := c.ModelProbeView(tc.recorded, tc.refusal)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ModelProbeView(%q, %q) = %v, %v; want %v, %v", tc.recorded, tc.refusal, got, ok, tc.want, tc.ok)
		}
	}
}
