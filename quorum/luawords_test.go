package quorum

import (
	"strings"
	"testing"

	"github.com/lock-agent/lock-agent/quorum/scripts"
)

// TestScriptsSayWhatTheGoCodeReads: the words the scripts write that the
// Go code reads back are written out in the .lua files; each must be the
// Go constant's.
func TestScriptsSayWhatTheGoCodeReads(t *testing.T) {
	for _, c := range []struct {
		file, word string
	}{
		{"acquire", awaitingAgent},
		{"cached", cachedMessage},
		{"cached", leaderMessage},
		{"cache_or_release", cachedMessage},
		{"set_value", leaderMessage},
		{"raise_fence", leaderMessage},
		{"retag", leaderMessage},
	} {
		if !strings.Contains(scripts.Text(c.file), "'"+c.word+"'") {
			t.Errorf("lua/%s.lua does not say %q", c.file, c.word)
		}
	}
}
