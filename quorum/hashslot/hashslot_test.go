package hashslot

import (
	"testing"

	"github.com/lock-agent/lock-agent/internal/redistest"
)

func TestSlotOfMatchesRedis(t *testing.T) {
	for _, key := range []string{"", "a", "foo", "t:{a}:h:h1", "t:{a}", "{}x", "x{}y{z}", "{user1000}.following", "123456789"} {
		if got, want := Of(key), redistest.SlotOf(key); got != want {
			t.Errorf("Of(%q) = %d, redis says %d", key, got, want)
		}
	}
	tags := tags()
	for slot, tag := range tags {
		if Of("t:epoch{"+tag+"}") != slot {
			t.Fatalf("slot %d: tag %q is in slot %d", slot, tag, Of(tag))
		}
	}
}

func TestSlotRanges(t *testing.T) {
	for _, tc := range []struct {
		slots []int
		want  string
	}{{nil, ""}, {[]int{0}, "0"}, {[]int{0, 1, 2, 5, 7, 8}, "0-2,5,7-8"}} {
		if got := Ranges(tc.slots); got != tc.want {
			t.Errorf("Ranges(%v) = %q, want %q", tc.slots, got, tc.want)
		}
	}
}
