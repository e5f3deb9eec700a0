package lockagenttest

import (
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestEventuallyReturnsOnceTheConditionHolds(t *testing.T) {
	var polls atomic.Int32
	Eventually(t, 5*time.Second, func() bool { return polls.Add(1) == 3 }, "never held")
	if n := polls.Load(); n != 3 {
		t.Fatalf("polled %d times, want 3", n)
	}
}

func TestEventuallyFailsAfterTheTimeout(t *testing.T) {
	rec := &recorder{TB: t}
	start := time.Now()
	done := make(chan struct{})
	go func() { // Fatalf ends the goroutine it is called on
		defer close(done)
		last := 0
		Eventually(rec, 30*time.Millisecond, func() bool { last++; return false }, "gave up after %d, last poll %d", 30, &last)
	}()
	<-done
	if !strings.HasPrefix(rec.msg, "gave up after 30, last poll ") || strings.HasSuffix(rec.msg, " 0") || strings.Contains(rec.msg, "0x") ||
		time.Since(start) < 30*time.Millisecond {
		t.Fatalf("failed with %q after %v", rec.msg, time.Since(start))
	}
}

type recorder struct {
	testing.TB
	msg string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
