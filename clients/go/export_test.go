package lockagent

import "time"

// SetUnlockGrace shortens how long Unlock waits past its ctx, for a test;
// it returns the function that puts it back.
func SetUnlockGrace(d time.Duration) (restore func()) {
	old := unlockGrace
	unlockGrace = d
	return func() { unlockGrace = old }
}

// MaxNamesLen is how many bytes the names of one LockAll may take.
var MaxNamesLen = maxNamesLen
