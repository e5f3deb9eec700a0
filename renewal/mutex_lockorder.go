//go:build lockorder

package renewal

import "github.com/lock-agent/lock-agent/internal/lockorder"

type watchdogMutex = lockorder.Mutex[lockorder.Watchdog]
