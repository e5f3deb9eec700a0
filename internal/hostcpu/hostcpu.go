// Package hostcpu reads how long the host's tasks have waited for a CPU:
// Linux's pressure stall information (PSI), the "some" line of
// /proc/pressure/cpu, whose total counts the time during which at least
// one runnable task waited for a CPU.
//
// A round on the masters reads it to tell a silent master from a starved
// one: while tasks wait for a CPU, a master on this host (or this agent's
// own reader of its answers) may be one of them, and its silence says
// nothing of whether it is up (see quorum's collect and rules.Trusted).
package hostcpu

import (
	"bytes"
	"os"
	"strconv"
	"time"
)

// Path is where the host's CPU pressure is read.
const Path = "/proc/pressure/cpu"

// Waited is the host's total time with a task waiting for a CPU, since
// boot, and whether it could be read: not where the kernel has no PSI
// (before Linux 4.20, or booted with psi=0).
func Waited() (time.Duration, bool) {
	b, err := os.ReadFile(Path)
	if err != nil {
		return 0, false
	}
	return parse(b)
}

// parse reads the "some" line's total (microseconds) of a PSI file.
func parse(b []byte) (time.Duration, bool) {
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		fields := bytes.Fields(line)
		if len(fields) == 0 || string(fields[0]) != "some" {
			continue
		}
		for _, f := range fields[1:] {
			v, ok := bytes.CutPrefix(f, []byte("total="))
			if !ok {
				continue
			}
			us, err := strconv.ParseUint(string(v), 10, 63)
			if err != nil {
				return 0, false
			}
			return time.Duration(us) * time.Microsecond, true
		}
	}
	return 0, false
}
