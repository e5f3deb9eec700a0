package quorum

import "testing"

func TestWantedMessagesReadBack(t *testing.T) {
	for _, tc := range []struct {
		name, message string
		instance      string
		want          Want
		ok            bool
	}{
		{"an exclusive want of two", Want{Count: 2}.message("a/1"), "a/1", Want{Count: 2}, true},
		{"a shared want of one", Want{Shared: true, Count: 1}.message("b/2"), "b/2", Want{Shared: true, Count: 1}, true},
		{"a count under one is said as one", Want{Count: 0}.message("c/3"), "c/3", Want{Count: 1}, true},
		{"an agent from before Want names only itself: exclusive, one", "wanted old/9", "old/9", Want{Count: 1}, true},
		{"a count that is not a number is one", "wanted x/1 shared lots", "x/1", Want{Shared: true, Count: 1}, true},
		{"a message with no instance is no want", "wanted ", "", Want{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			instance, want, ok := parseWant(tc.message)
			if instance != tc.instance || want != tc.want || ok != tc.ok {
				t.Fatalf("parseWant(%q) = %q %+v %v, want %q %+v %v", tc.message, instance, want, ok, tc.instance, tc.want, tc.ok)
			}
		})
	}
}
