//go:build lockorder

package lockorder

import (
	"strings"
	"testing"
)

// TestAnInversionPanics: a mutex taken while one of a later rank is held
// is caught, and taking them in order is not.
func TestAnInversionPanics(t *testing.T) {
	var s Mutex[Session]
	var a Mutex[Manager]
	s.Lock()
	a.Lock()
	a.Unlock()
	s.Unlock()

	a.Lock()
	defer a.Unlock()
	defer func() {
		r := recover()
		if msg, _ := r.(string); !strings.Contains(msg, "session.mu taken while Manager.mu is held") {
			t.Fatalf("recovered %v, want the inversion", r)
		}
	}()
	s.Lock()
	t.Fatal("session.mu was taken under Manager.mu")
}

// TestUnlockInAnotherGoroutine: a mutex unlocked by another goroutine is
// no longer counted as held by the one that locked it.
func TestUnlockInAnotherGoroutine(t *testing.T) {
	var s Mutex[Session]
	var a Mutex[Manager]
	a.Lock()
	done := make(chan struct{})
	go func() {
		a.Unlock()
		close(done)
	}()
	<-done
	s.Lock()
	s.Unlock()
}
