// Package hostcpu reads how long the host's tasks have waited for a CPU:
// Linux's pressure stall information (PSI), the "some" line of
// /proc/pressure/cpu, whose total counts the time during which at least
// one runnable task waited for a CPU.
//
// The agent gives it to its quorum rounds (quorum.Config.HostWaited) to
// tell a silent master from a starved one: while tasks wait for a CPU, a
// master on this host, or this agent's own reader of a master's answers,
// may be one of them, and its silence says nothing of whether the master
// is up. The figure is the host's, in a container too.
package hostcpu

import (
	"bytes"
	"math"
	"strconv"
	"time"
)

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
			if err != nil || us > math.MaxInt64/uint64(time.Microsecond) {
				return 0, false
			}
			return time.Duration(us) * time.Microsecond, true
		}
	}
	return 0, false
}
