package hostcpu

import (
	"os"
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestWaitedGrowsWhileTasksWaitForACPU: where the kernel has PSI, the
// total grows while more tasks want a CPU than there are CPUs.
func TestWaitedGrowsWhileTasksWaitForACPU(t *testing.T) {
	if _, err := os.Stat(path); err != nil {
		t.Skipf("no PSI here: %v", err)
	}
	before, ok := Waited()
	if !ok {
		t.Fatalf("%s exists but could not be read", path)
	}
	// More threads that run than CPUs: some wait.
	n := 3 * runtime.NumCPU()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(n))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(stop)
	for range n {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
			}
		})
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		time.Sleep(50 * time.Millisecond)
		after, _ := Waited()
		if after > before {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the total stayed at %v for 10 s with three spinning threads per CPU", before)
		}
	}
}
