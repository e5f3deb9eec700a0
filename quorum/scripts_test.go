package quorum

import (
	"strings"
	"testing"
)

// TestEveryLuaFileIsInAScript: a file in lua/ that no registered script
// sends is dead text a reader would take for a script the agent runs, and
// a template's verbs left in a script would fail on the master.
func TestEveryLuaFileIsInAScript(t *testing.T) {
	files, err := luaFiles.ReadDir("lua")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(f.Name(), ".lua")
		if name == "batch" {
			continue // a template: see TestNoScriptKeepsATemplateVerb
		}
		text := luaText(name)
		sent := false
		for _, s := range allScripts {
			sent = sent || strings.Contains(s.src, text) || strings.Contains(s.fallback().src, text)
		}
		if !sent {
			t.Errorf("lua/%s.lua is in no registered script", name)
		}
	}
}

func TestNoScriptKeepsATemplateVerb(t *testing.T) {
	for _, s := range allScripts {
		if strings.Contains(s.src, "%[") || strings.Contains(s.src, "%!") {
			t.Errorf("a script keeps a template verb or a fmt error:\n%s", s.src)
		}
	}
}

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
		if !strings.Contains(luaText(c.file), "'"+c.word+"'") {
			t.Errorf("lua/%s.lua does not say %q", c.file, c.word)
		}
	}
}
