package quorum

import (
	"strings"
	"testing"
)

// TestScriptsDeriveKeysAsKeysGoNamesThem: the keys the scripts make from
// the keys they are given are spelled in Lua; a suffix changed in keys.go
// alone would make the agent and its scripts read different keys.
func TestScriptsDeriveKeysAsKeysGoNamesThem(t *testing.T) {
	for _, c := range []struct{ file, derived string }{
		{"renew", "set .. '" + holderInfix + "' .. ARGV[i]"},
		{"acquire", "KEYS[1] .. '" + tombstoneInfix + "' .. ARGV[1]"},
		{"repair", "KEYS[1] .. '" + tombstoneInfix + "' .. ARGV[1]"},
		{"release", "KEYS[1] .. '" + tombstoneInfix + "' .. ARGV[1]"},
		{"end", "KEYS[1] .. '" + tombstoneInfix + "' .. ARGV[1]"},
		{"revoke", "KEYS[1] .. '" + tombstoneInfix + "' .. m"},
		{"release", "KEYS[2] .. '" + revokedSuffix + "'"},
		{"end", "KEYS[2] .. '" + revokedSuffix + "'"},
		{"revoke", "key .. '" + revokedSuffix + "'"},
	} {
		if !strings.Contains(luaText(c.file), c.derived) {
			t.Errorf("lua/%s.lua does not derive %s", c.file, c.derived)
		}
	}
}

func TestKeyNames(t *testing.T) {
	c := &Cluster{cfg: Config{KeyPrefix: "P"}}
	for _, k := range []struct{ got, want string }{
		{c.setKey("n"), "P{n}"},
		{c.holderKey("n", "H"), "P{n}:h:H"},
		{c.holderPrefix("n") + "H", "P{n}:h:H"},
		{c.revokedKey("n", "H"), "P{n}:h:H!"},
		{c.channel("n"), "P{n}:released"},
		{c.fenceKey("n"), "P{n}:fence"},
		{c.queueKey("n"), "P{n}:q"},
		{c.deadlinesKey("n"), "P{n}:qd"},
		{c.ticketKey("n"), "P{n}:qseq"},
		{c.leftPrefix("n"), "P{n}:qx:"},
		{c.observedKey("n"), "P{n}:obs"},
		{c.waitingKey("n"), "P{n}:w"},
		{c.waitingDeadlinesKey("n"), "P{n}:wd"},
		{c.markerKey(), "Pepoch"},
		{c.slotMarkerKey(0), "Pepoch{" + slotTags()[0] + "}"},
		{c.revocations(), "Prevocations"},
	} {
		if k.got != k.want {
			t.Errorf("key %q, want %q", k.got, k.want)
		}
	}
}
