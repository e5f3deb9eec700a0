//go:build !lockorder

package outbox

import "sync"

// mutex is the outbox's mutex, last in the agent's lock order (see
// agent's session.mu): a sync.Mutex, but in a build with the lockorder tag
// (see internal/lockorder), which checks that order.
type mutex = sync.Mutex
