//go:build !linux

package hostcpu

import "time"

// Waited is unknown where there is no Linux PSI.
func Waited() (time.Duration, bool) { return 0, false }
