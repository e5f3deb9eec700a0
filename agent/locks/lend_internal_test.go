package locks

import (
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/protocol"
)

// TestWhichLocksALendingLends: a run passes plain exclusive locks, value=
// and notify=wanted ones too; a linger lends plain locks of either mode,
// but no value= or notify=wanted; neither lends what its record says more
// of than who holds it.
func TestWhichLocksALendingLends(t *testing.T) {
	plain := protocol.Lock{Names: []string{"n"}, Mode: protocol.Exclusive}
	with := func(edit func(l *protocol.Lock)) protocol.Lock {
		l := plain
		edit(&l)
		return l
	}
	for _, tc := range []struct {
		name        string
		lock        protocol.Lock
		run, linger bool
	}{
		{"a plain exclusive lock is lent by both", plain, true, true},
		{"a shared lock is lent by a linger only", with(func(l *protocol.Lock) { l.Mode = protocol.Shared }), false, true},
		{"a lock with a value is passed in a run only", with(func(l *protocol.Lock) { l.Value = "v" }), true, false},
		{"a notify=wanted lock is passed in a run only", with(func(l *protocol.Lock) { l.NotifyWanted = true }), true, false},
		{"a semaphore is lent by neither", with(func(l *protocol.Lock) { l.Limit = 3 }), false, false},
		{"a ttl= hold is lent by neither", with(func(l *protocol.Lock) { l.TTL = time.Second }), false, false},
		{"a fair=true lock is lent by neither", with(func(l *protocol.Lock) { l.Fair = true }), false, false},
		{"a lock with delay= is lent by neither", with(func(l *protocol.Lock) { l.Delay = time.Second }), false, false},
		{"a lock with min_hold= is lent by neither", with(func(l *protocol.Lock) { l.MinHold = time.Second }), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := lendable(tc.lock, lendRun); got != tc.run {
				t.Errorf("a run lends it: %v, want %v", got, tc.run)
			}
			if got := lendable(tc.lock, lendLinger); got != tc.linger {
				t.Errorf("a linger lends it: %v, want %v", got, tc.linger)
			}
		})
	}
}
