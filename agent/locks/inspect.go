package locks

import (
	"strings"
	"time"
)

// What the agent's tests look at (agent/export_test.go): read-outs and one
// lever of the manager's state, not used by the agent itself.

// StandBack makes the contender of name stand back until until, as the end
// of a run of local holders that another agent waited for does (see
// cohort.go). It says false if name has no queue.
func (a *Manager) StandBack(name string, until time.Time) bool {
	a.mu.Lock()
	q := a.queueLocked(name)
	a.mu.Unlock()
	if q == nil {
		return false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.yieldUntil = until
	return true
}

// Names is the names the manager keeps a record of, each with the parts of
// its record that are set.
func (a *Manager) Names() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var names []string
	for key, n := range a.names {
		parts := []string{key + ":"}
		for part, set := range map[string]bool{"queue": n.queue != nil, "locked": n.locked != nil, "lent": n.lent != nil,
			"wanted": n.wanted != nil, "waitRec": n.waitRec != nil, "observation": n.observation != nil} {
			if set {
				parts = append(parts, part)
			}
		}
		names = append(names, strings.Join(parts, " "))
	}
	return names
}

// Lending is how the manager lends name to its local holders now: "run",
// "linger", or "" (it lends nothing).
func (a *Manager) Lending(name string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.runLocked(name) != nil:
		return "run"
	case a.cacheLocked(name) != nil:
		return "linger"
	}
	return ""
}
