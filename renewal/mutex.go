//go:build !lockorder

package renewal

import "sync"

// watchdogMutex is Watchdog.mu: a sync.Mutex, but in a build with the
// lockorder tag (see internal/lockorder), which checks the lock order.
type watchdogMutex = sync.Mutex
