package quorum

import (
	"errors"
	"slices"
	"testing"
)

// TestSettingsRefusalsNameWhatMostMastersRecord: ERR SETTINGS's text and
// STATUS's settings_differ both speak of the settings most refusing
// masters record, not of whichever master answered first.
func TestSettingsRefusalsNameWhatMostMastersRecord(t *testing.T) {
	ours := ParseSettings("lease=3s;drift=0.01")
	lease := ParseSettings("lease=1s;drift=0.01")
	drift := ParseSettings("lease=3s;drift=0.05")
	refusal := func(master string, recorded Settings) error {
		return &MasterError{master, &SettingsError{Ours: ours, Recorded: recorded}}
	}
	for _, tc := range []struct {
		name      string
		masters   []error
		size      int
		wantText  string
		wantNames []string
	}{
		{"the settings two masters of three record, though the third answered first",
			[]error{refusal("c", drift), refusal("a", lease), refusal("b", lease)}, 3,
			"lease=3s here, the masters record lease=1s (on 2 of 3)", []string{"lease"}},
		{"one refusal is one master's",
			[]error{errors.New("c: timed out"), refusal("a", drift)}, 3,
			"drift=0.01 here, the master records drift=0.05 (on 1 of 3)", []string{"drift"}},
		{"a tie goes to the first",
			[]error{refusal("a", drift), refusal("b", lease)}, 0,
			"drift=0.01 here, the master records drift=0.05 (on 1)", []string{"drift"}},
		{"no refusal for settings names none",
			[]error{errors.New("a: timed out")}, 3,
			"settings differ from the cluster's", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := &RoundError{Kind: ErrSettings, Needed: 2, Masters: tc.masters, Size: tc.size}
			if got := err.Error(); got != tc.wantText {
				t.Errorf("text %q, want %q", got, tc.wantText)
			}
			var names []string
			for _, d := range SettingsDiffOf(err) {
				names = append(names, d.Name)
			}
			if !slices.Equal(names, tc.wantNames) {
				t.Errorf("SettingsDiffOf names %v, want %v", names, tc.wantNames)
			}
		})
	}
}
