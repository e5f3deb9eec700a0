package scripts

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
		text := Text(name)
		sent := false
		for _, s := range All {
			sent = sent || strings.Contains(s.Src, text) || strings.Contains(s.Fallback().Src, text)
		}
		if !sent {
			t.Errorf("lua/%s.lua is in no registered script", name)
		}
	}
}

func TestNoScriptKeepsATemplateVerb(t *testing.T) {
	for _, s := range All {
		if strings.Contains(s.Src, "%[") || strings.Contains(s.Src, "%!") {
			t.Errorf("a script keeps a template verb or a fmt error:\n%s", s.Src)
		}
	}
}
