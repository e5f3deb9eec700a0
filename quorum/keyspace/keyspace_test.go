package keyspace

import (
	"strings"
	"testing"

	"github.com/lock-agent/lock-agent/quorum/hashslot"
	"github.com/lock-agent/lock-agent/quorum/scripts"
)

// TestScriptsDeriveKeysAsKeyspaceNamesThem: the keys the scripts make from
// the keys they are given are spelled in Lua; a suffix changed in keyspace.go
// alone would make the agent and its scripts read different keys.
func TestScriptsDeriveKeysAsKeyspaceNamesThem(t *testing.T) {
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
		if !strings.Contains(scripts.Text(c.file), c.derived) {
			t.Errorf("lua/%s.lua does not derive %s", c.file, c.derived)
		}
	}
}

func TestKeyNames(t *testing.T) {
	p := Prefix("P")
	for _, k := range []struct{ got, want string }{
		{p.Set("n"), "P{n}"},
		{p.Holder("n", "H"), "P{n}:h:H"},
		{p.HolderPrefix("n") + "H", "P{n}:h:H"},
		{p.Revoked("n", "H"), "P{n}:h:H!"},
		{p.Channel("n"), "P{n}:released"},
		{p.Fence("n"), "P{n}:fence"},
		{p.Queue("n"), "P{n}:q"},
		{p.Deadlines("n"), "P{n}:qd"},
		{p.Ticket("n"), "P{n}:qseq"},
		{p.LeftPrefix("n"), "P{n}:qx:"},
		{p.Observed("n"), "P{n}:obs"},
		{p.Waiting("n"), "P{n}:w"},
		{p.WaitingDeadlines("n"), "P{n}:wd"},
		{p.Marker(), "Pepoch"},
		{p.SlotMarker(0), "Pepoch{" + hashslot.Tag(0) + "}"},
		{p.Revocations(), "Prevocations"},
	} {
		if k.got != k.want {
			t.Errorf("key %q, want %q", k.got, k.want)
		}
	}
}
