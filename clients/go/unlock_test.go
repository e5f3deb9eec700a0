package lockagent_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	lockagent "github.com/lock-agent/lock-agent/clients/go"
)

// TestUnlockWithACancelledContextReleases: the README's `defer
// l.Unlock(ctx)` runs after the job's ctx was cancelled. The release still
// happens, Unlock says so, Done closes and Err says the lock was unlocked.
func TestUnlockWithACancelledContextReleases(t *testing.T) {
	c := dial(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	l, err := c.Lock(ctx, "go/unlock-cancelled")
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock with a cancelled ctx: %v", err)
	}
	select {
	case <-l.Done():
	default:
		t.Fatal("Done not closed after Unlock")
	}
	if !errors.Is(l.Err(), lockagent.ErrUnlocked) || context.Cause(l.Context()) != l.Err() {
		t.Fatalf("Err = %v, cause = %v; want ErrUnlocked", l.Err(), context.Cause(l.Context()))
	}
	bg := context.Background()
	if holds, err := c.Holds(bg); err != nil || len(holds) != 0 {
		t.Fatalf("holds after Unlock: %+v %v", holds, err)
	}
	other := dial(t, "")
	again, err := other.Lock(bg, "go/unlock-cancelled", lockagent.Wait(0))
	if err != nil {
		t.Fatalf("the name is not free after Unlock: %v", err)
	}
	again.Unlock(bg)
	if err := l.Unlock(bg); !errors.Is(err, lockagent.ErrNotHeld) {
		t.Fatalf("second Unlock: %v, want ErrNotHeld", err)
	}
}

// TestUnlockOfALostLockSaysItWasLost: Unlock after a loss does not pretend
// to have released anything.
func TestUnlockOfALostLockSaysItWasLost(t *testing.T) {
	c := dial(t, "")
	ctx := context.Background()
	l, err := c.Lock(ctx, "go/unlock-lost", lockagent.TTL(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	<-l.Done()
	var lost *lockagent.LostError
	if err := l.Unlock(ctx); !errors.As(err, &lost) || lost.Reason != "expired" {
		t.Fatalf("Unlock of a lost lock: %v", err)
	}
}

// TestUnlockWhileTheConnectionClosesIsARelease: the agent releases every
// lock of a closed connection, so an Unlock racing the close succeeded.
func TestUnlockWhileTheConnectionClosesIsARelease(t *testing.T) {
	c := dial(t, "")
	ctx := context.Background()
	for range 20 {
		l, err := c.Lock(ctx, "go/unlock-close", lockagent.Owner("o"))
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	l, err := c.Lock(ctx, "go/unlock-close")
	if err != nil {
		t.Fatal(err)
	}
	go c.Close()
	if err := l.Unlock(ctx); err != nil && !errors.Is(err, lockagent.ErrLost) {
		t.Fatalf("Unlock racing Close: %v", err)
	}
	<-l.Done()
}

// TestUnlockTheAgentDoesNotAnswerSaysSo: if no answer comes within the grace
// after ctx ended, Unlock says the release is not confirmed, and the lock
// ends when the answer does come.
func TestUnlockTheAgentDoesNotAnswerSaysSo(t *testing.T) {
	defer lockagent.SetUnlockGrace(100 * time.Millisecond)()
	proxy := startProxy(t, agentSocket)
	c := dial(t, proxy.path)
	l, err := c.Lock(context.Background(), "go/unlock-unanswered")
	if err != nil {
		t.Fatal(err)
	}
	release := proxy.holdReplies()
	defer release()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = l.Unlock(ctx)
	if err == nil || !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "may still hold") {
		t.Fatalf("Unlock with no answer: %v", err)
	}
	if l.Err() != nil {
		t.Fatalf("Err = %v before the answer came", l.Err())
	}
	release()
	select {
	case <-l.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed after the answer came")
	}
	if !errors.Is(l.Err(), lockagent.ErrUnlocked) {
		t.Fatalf("Err = %v, want ErrUnlocked", l.Err())
	}
}
