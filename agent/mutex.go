//go:build !lockorder

package agent

import "sync"

// The agent's mutexes, by their place in the lock order (see session.mu):
// each a sync.Mutex, but in a build with the lockorder tag (see
// internal/lockorder), which checks that order.
type (
	sessionMutex = sync.Mutex
	agentMutex   = sync.Mutex
	queueMutex   = sync.Mutex
)
