package agent

// One record per name. Everything this agent knows of one name lives in its
// name record, in Agent.names: the live exclusive lock it holds of it, the
// waiters it queues for it, the record it lends to its local holders (a
// run or a linger: see lend.go), the notify=wanted holds that hear of other
// agents' waiters, its waiting record on the masters, and the sessions that
// observe it. A record is made by the first of these that needs one
// (nameLocked) and retired by the last to let go (tidyLocked): a name used
// once leaves nothing behind.
//
// What is not here, and why:
//   - A hold is its session's (session.holds, by name and owner): the name
//     points at its live exclusive one (locked), and the watchdog's record
//     at its live holder (renewal.Hold.Owner).
//   - The names this agent released lately, and those other agents wanted
//     lately (Agent.released, Agent.shared: see cache.go), are a bounded
//     history of names that have no state left here, kept for a window: a
//     record retired when empty cannot hold them.

// nameRecord is what this agent knows of one name. Its fields are guarded by
// Agent.mu; each part has locks of its own besides (the queue's mu, ...).
type nameRecord struct {
	key string
	// queue is this agent's waiters for the name in arrival order, nil when
	// none wait; its contender retires it (see Agent.head).
	queue *queue
	// locked is the live exclusive lock this agent holds of the name, the
	// one a local waiter may be passed (see lateRun). startHoldLocked and
	// endHoldLocked alone keep it.
	locked *hold
	// lent is the record this agent lends to its local holders of the
	// name, a run or a linger (see lend.go); nil when none.
	lent *lending
	// wanted is the notify=wanted holds of the name (see watch.go).
	wanted *wantedName
	// waitRec is the name's waiting record on the masters (see waiters.go).
	waitRec *waitRecord
	// observation is the sessions that observe the name (see watch.go).
	observation *observation
}

// empty says whether n holds nothing: it may be retired.
func (n *nameRecord) empty() bool {
	return n.queue == nil && n.locked == nil && n.lent == nil &&
		n.wanted == nil && n.waitRec == nil && n.observation == nil
}

// nameLocked is key's record, made if the agent had none. The caller puts
// something in it (or calls tidyLocked). Agent.mu is held.
func (a *Agent) nameLocked(key string) *nameRecord {
	n := a.names[key]
	if n == nil {
		n = &nameRecord{key: key}
		a.names[key] = n
	}
	return n
}

// tidyLocked retires n once it holds nothing; every part of a record that
// lets go calls it. Agent.mu is held.
func (a *Agent) tidyLocked(n *nameRecord) {
	if n.empty() && a.names[n.key] == n {
		delete(a.names, n.key)
	}
}

// queueLocked is key's queue of waiters, nil if none wait. Agent.mu is held.
func (a *Agent) queueLocked(key string) *queue {
	if n := a.names[key]; n != nil {
		return n.queue
	}
	return nil
}

// lentLocked is the record key lends its local holders, nil if none.
// Agent.mu is held.
func (a *Agent) lentLocked(key string) *lending {
	if n := a.names[key]; n != nil {
		return n.lent
	}
	return nil
}

// runLocked is key's run of local holders, nil if none. Agent.mu is held.
func (a *Agent) runLocked(key string) *lending {
	if l := a.lentLocked(key); l != nil && l.policy == lendRun {
		return l
	}
	return nil
}

// cacheLocked is key's cache (a linger), nil if none. Agent.mu is held.
func (a *Agent) cacheLocked(key string) *lending {
	if l := a.lentLocked(key); l != nil && l.policy == lendLinger {
		return l
	}
	return nil
}

// queueOf is key's queue of waiters, nil if none wait.
func (a *Agent) queueOf(key string) *queue {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.queueLocked(key)
}

// exclusiveLocked is the live exclusive lock this agent holds of key, nil
// if none. Agent.mu is held.
func (a *Agent) exclusiveLocked(key string) *hold {
	if n := a.names[key]; n != nil {
		return n.locked
	}
	return nil
}

// wantedLocked is key's notify=wanted holds, nil if none. Agent.mu is held.
func (a *Agent) wantedLocked(key string) *wantedName {
	if n := a.names[key]; n != nil {
		return n.wanted
	}
	return nil
}
