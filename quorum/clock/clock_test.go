package clock

import (
	"testing"
	"time"
)

func TestFakeClockFiresInOrder(t *testing.T) {
	c := NewFake(time.Unix(0, 0))
	a := c.NewTimer(2 * time.Second)
	b := c.NewTimer(time.Second)
	c.Advance(1500 * time.Millisecond)
	select {
	case <-b.C():
	default:
		t.Fatal("1s timer did not fire at 1.5s")
	}
	select {
	case <-a.C():
		t.Fatal("2s timer fired at 1.5s")
	default:
	}
	if a.Stop() != true || c.Timers() != 0 {
		t.Fatal("Stop of an armed timer must report true and disarm it")
	}
}
