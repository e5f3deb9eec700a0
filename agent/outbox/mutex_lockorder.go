//go:build lockorder

package outbox

import "github.com/lock-agent/lock-agent/internal/lockorder"

type mutex = lockorder.Mutex[lockorder.Outbox]
