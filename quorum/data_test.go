package quorum_test

import (
	"strings"
	"testing"

	"github.com/lock-agent/lock-agent/quorum"
)

// TestClassifyData: an agent says "new" only when every master of the
// deployment was met with no marker and none ever voted; "lost" once it
// knows the deployment served; else it cannot tell. Only "new" is ever
// advised lock-agent bootstrap.
func TestClassifyData(t *testing.T) {
	fresh := quorum.MarkerFacts{Probed: true, Fresh: true}
	planted := quorum.MarkerFacts{Probed: true}                                  // a marker another way: bootstrap, restart, settings
	changed := quorum.MarkerFacts{Probed: true, Fresh: true, EpochChanged: true} // emptied under this agent's eyes
	unprobed := quorum.MarkerFacts{}
	for _, tc := range []struct {
		name        string
		masters     []quorum.MarkerFacts
		established bool
		want        quorum.Data
	}{
		{"every master met with no marker, none voted: a new deployment", []quorum.MarkerFacts{fresh, fresh, fresh}, false, quorum.DataNew},
		{"one master not probed yet: cannot tell", []quorum.MarkerFacts{fresh, fresh, unprobed}, false, quorum.DataUnknown},
		{"one master with a marker not planted on an empty master: cannot tell", []quorum.MarkerFacts{fresh, fresh, planted}, false, quorum.DataUnknown},
		{"a master voted once: the deployment served", []quorum.MarkerFacts{fresh, fresh, fresh}, true, quorum.DataLost},
		{"this agent saw a master's epoch change: it lost its data", []quorum.MarkerFacts{fresh, changed, fresh}, false, quorum.DataLost},
		{"an epoch changed on a master not quarantined now: the deployment served", []quorum.MarkerFacts{changed, unprobed, planted}, false, quorum.DataLost},
		{"no master probed: cannot tell", []quorum.MarkerFacts{unprobed, unprobed, unprobed}, false, quorum.DataUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := quorum.ClassifyData(tc.masters, tc.established); got != tc.want {
				t.Fatalf("ClassifyData = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestMasterData: a master the settings command quarantined kept its data,
// whatever the deployment's story; any other tells the deployment's.
func TestMasterData(t *testing.T) {
	changed := quorum.MarkerFacts{Probed: true, Changed: true}
	for _, d := range []quorum.Data{quorum.DataNew, quorum.DataLost, quorum.DataUnknown} {
		if got := quorum.MasterData(changed, d); got != quorum.DataChanged {
			t.Errorf("a master the settings command changed, in a deployment %q: %q", d, got)
		}
		if got := quorum.MasterData(quorum.MarkerFacts{Probed: true}, d); got != d {
			t.Errorf("another master, in a deployment %q: %q", d, got)
		}
	}
}

// TestAdviceSuggestsBootstrapOnlyForANewDeployment: the advice for a
// master that lost its data, or may have, never tells to bootstrap it.
func TestAdviceSuggestsBootstrapOnlyForANewDeployment(t *testing.T) {
	for _, d := range []quorum.Data{quorum.DataLost, quorum.DataUnknown, quorum.DataChanged, quorum.DataNone} {
		if a := d.Advice(); strings.Contains(strings.ReplaceAll(a, "never lock-agent bootstrap", ""), "bootstrap") || !strings.Contains(a, "wait") {
			t.Errorf("%q: advice %q suggests bootstrap, or not to wait", d, a)
		}
	}
	if a := quorum.DataNew.Advice(); !strings.Contains(a, "lock-agent bootstrap") {
		t.Errorf("a new deployment's advice %q does not tell of bootstrap", a)
	}
	for _, reason := range []string{quorum.QuarantineReason, quorum.UnplantedReason} {
		if strings.Contains(reason, "bootstrap") {
			t.Errorf("%q suggests bootstrap whatever happened", reason)
		}
	}
}
