package quorum

import (
	"slices"
	"testing"
	"time"
)

// TestRenewSendsPreparedKeysAsItBuildsThem: the renew calls of keys that
// Renew prepared before (see Prepared) are those it builds for fresh keys,
// and a key whose lease or kind changed, or that another cluster
// prepared, is prepared anew rather than sent as it was.
func TestRenewSendsPreparedKeysAsItBuildsThem(t *testing.T) {
	newC := func(prefix string) *Cluster {
		c, err := New(Config{KeyPrefix: prefix, Masters: []MasterConfig{{Name: "a", Address: "127.0.0.1:1"}}})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c, other := newC("t:"), newC("o:")
	// holdCall is a one-hold call's keys and arguments, but the marker
	// and the gate arguments (they are per call).
	holdCall := func(c *Cluster, keys []RenewKey) (k, a []string) {
		cut := c.renewCalls(time.Second, keys, false)
		defer cut.free()
		return slices.Clone(cut.calls[0].keys[1:]), slices.Clone(cut.calls[0].args[2:])
	}
	for _, tc := range []struct {
		name     string
		key      RenewKey
		change   func(*RenewKey)
		by       *Cluster
		wantKeys []string
		wantArgs []string
	}{
		{"a hold prepared before is sent as it was built", RenewKey{Name: "n", Holder: "h"}, nil, c,
			[]string{"t:{n}"}, []string{"h", "1000"}},
		{"a hold with its own lease keeps it", RenewKey{Name: "n", Holder: "h", Lease: 2 * time.Second}, nil, c,
			[]string{"t:{n}"}, []string{"h", "2000"}},
		{"a queue entry is sent as its heartbeat", RenewKey{Name: "n", Holder: "m", Entry: true}, nil, c,
			[]string{c.keys.Queue("n"), c.keys.Deadlines("n")}, []string{"m", "q1000"}},
		{"a waiting record is sent as one", RenewKey{Name: "n", Holder: "i", Waiting: true}, nil, c,
			[]string{c.keys.WaitingDeadlines("n"), c.keys.Waiting("n")}, []string{"i", "w1000"}},
		{"a hold whose lease changed is prepared anew", RenewKey{Name: "n", Holder: "h"},
			func(k *RenewKey) { k.Lease = 3 * time.Second }, c, []string{"t:{n}"}, []string{"h", "3000"}},
		{"a hold that now keeps a tail is prepared anew", RenewKey{Name: "n", Holder: "h"},
			func(k *RenewKey) { k.Tail = true }, c, []string{"t:{n}"}, []string{"h", "t1000"}},
		{"a hold another cluster prepared is prepared anew", RenewKey{Name: "n", Holder: "h"}, nil, other,
			[]string{"o:{n}"}, []string{"h", "1000"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keys := []RenewKey{tc.key}
			firstKeys, firstArgs := holdCall(c, keys)
			if keys[0].Prepared == (Prepared{}) {
				t.Fatal("renewCalls left the caller's key unprepared")
			}
			if tc.change != nil {
				tc.change(&keys[0])
			}
			gotKeys, gotArgs := holdCall(tc.by, keys)
			if !slices.Equal(gotKeys, tc.wantKeys) || !slices.Equal(gotArgs, tc.wantArgs) {
				t.Errorf("prepared: keys %q args %q, want %q %q", gotKeys, gotArgs, tc.wantKeys, tc.wantArgs)
			}
			if tc.change == nil && tc.by == c && (!slices.Equal(firstKeys, gotKeys) || !slices.Equal(firstArgs, gotArgs)) {
				t.Errorf("fresh: keys %q args %q; prepared: %q %q", firstKeys, firstArgs, gotKeys, gotArgs)
			}
		})
	}
}
