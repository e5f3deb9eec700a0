package lockagenttest

import (
	"fmt"
	"reflect"
	"testing"
	"time"
)

// Eventually polls cond until it holds, and fails t with format and args if
// it does not within timeout. An arg that is a pointer (other than a
// fmt.Stringer or an error) is shown as what it points to when Eventually
// gives up, so that cond can leave there what it saw last. Eventually polls at once, then after 1ms, 2ms, 4ms … up to 20ms
// apart. Call it from the test's goroutine: it calls t.Fatalf.
func Eventually(t testing.TB, timeout time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for pause := time.Millisecond; !cond(); pause = min(2*pause, 20*time.Millisecond) {
		if time.Now().After(deadline) {
			shown := make([]any, len(args))
			for i, a := range args {
				shown[i] = a
				switch a.(type) {
				case fmt.Stringer, error: // fmt calls its method
					continue
				}
				if v := reflect.ValueOf(a); v.Kind() == reflect.Pointer && !v.IsNil() {
					shown[i] = v.Elem().Interface()
				}
			}
			t.Fatalf(format, shown...)
		}
		time.Sleep(pause) // a poll: what cond looks at sends no signal
	}
}
