package hostcpu

import (
	"os"
	"time"
)

// path is where the host's CPU pressure is read.
const path = "/proc/pressure/cpu"

// Waited is the host's total time with a task waiting for a CPU, since
// boot, and whether it could be read: not where the kernel has no PSI
// (before Linux 4.20, or booted with psi=0, as RHEL 8 is by default), nor
// where /proc hides it (systemd's ProcSubset=pid).
func Waited() (time.Duration, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	return parse(b)
}
