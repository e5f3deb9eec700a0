package renewal

import "github.com/lock-agent/lock-agent/quorum"

// UpdateRecord changes h's record (see Hold.Record) in place with change,
// under the watchdog's lock: a SET replaced the hold's value, and a master
// that lacks the record must get it back with the new one. It returns
// false, and changes nothing, if h is no longer watched.
func (w *Watchdog) UpdateRecord(h *Hold, change func(*quorum.Record)) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.watched(h) {
		return false
	}
	change(&h.Record)
	return true
}
