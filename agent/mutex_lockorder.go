//go:build lockorder

package agent

import "github.com/lock-agent/lock-agent/internal/lockorder"

type (
	sessionMutex = lockorder.Mutex[lockorder.Session]
	agentMutex   = lockorder.Mutex[lockorder.Agent]
	queueMutex   = lockorder.Mutex[lockorder.Queue]
)
