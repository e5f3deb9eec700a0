package hostcpu

import (
	"os"
	"runtime"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want time.Duration
		ok   bool
	}{
		{"kernel 6", "some avg10=98.58 avg60=73.60 avg300=63.15 total=40261494946\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", 40261494946 * time.Microsecond, true},
		{"some only (before 5.13)", "some avg10=0.00 avg60=0.00 avg300=0.00 total=12\n", 12 * time.Microsecond, true},
		{"full first", "full avg10=0.00 avg60=0.00 avg300=0.00 total=7\nsome avg10=1.00 avg60=0.00 avg300=0.00 total=9\n", 9 * time.Microsecond, true},
		{"no some line", "full avg10=0.00 avg60=0.00 avg300=0.00 total=7\n", 0, false},
		{"no total", "some avg10=0.00 avg60=0.00 avg300=0.00\n", 0, false},
		{"bad total", "some avg10=0.00 total=-3\n", 0, false},
		{"empty", "", 0, false},
	} {
		got, ok := parse([]byte(tc.in))
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: parse = %v, %v; want %v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

// TestWaitedGrowsWhileTasksWaitForACPU: where the kernel has PSI, the
// total grows while more tasks want a CPU than there are CPUs.
func TestWaitedGrowsWhileTasksWaitForACPU(t *testing.T) {
	if _, err := os.Stat(Path); err != nil {
		t.Skipf("no PSI here: %v", err)
	}
	before, ok := Waited()
	if !ok {
		t.Fatalf("%s exists but could not be read", Path)
	}
	// More threads that run than CPUs: some wait.
	n := 3 * runtime.NumCPU()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(n))
	stop := make(chan struct{})
	for range n {
		go func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
			}
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		time.Sleep(50 * time.Millisecond)
		after, _ := Waited()
		if after > before {
			close(stop)
			return
		}
		if time.Now().After(deadline) {
			close(stop)
			t.Fatalf("the total stayed at %v for 10 s with three spinning threads per CPU", before)
		}
	}
}
