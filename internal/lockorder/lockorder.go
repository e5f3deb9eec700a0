// Package lockorder checks that the agent's mutexes are taken in one order.
// In a build with the lockorder tag (`go test -race -tags lockorder ...`),
// Mutex records which mutexes each goroutine holds and panics when one is
// taken while a mutex of the same or a later rank is held; it also counts
// acquisitions, by rank. Without the tag Mutex is sync.Mutex itself (a
// type alias): the agent, its outbox and the watchdog declare each mutex
// as a Mutex of its rank once, and only the checking build pays for it.
//
// The order, outermost first (it is written out, with why, at the
// session's mu in agent/server/session.go):
//
//	session.mu → Manager.mu → queue.mu → Watchdog.mu → Outbox.mu (agent/outbox)
package lockorder

// A Rank places a mutex in the lock order: one of the types below.
type Rank interface {
	rank() (int, string)
}

// The ranks, outermost first.
type (
	Session  struct{} // agent/server: session.mu
	Manager  struct{} // agent/locks: Manager.mu
	Queue    struct{} // agent/locks: queue.mu
	Watchdog struct{} // renewal: Watchdog.mu
	Outbox   struct{} // agent/outbox: Outbox.mu, taken last of all
)

func (Session) rank() (int, string)  { return 1, "session.mu" }
func (Manager) rank() (int, string)  { return 2, "Manager.mu" }
func (Queue) rank() (int, string)    { return 3, "queue.mu" }
func (Watchdog) rank() (int, string) { return 4, "Watchdog.mu" }
func (Outbox) rank() (int, string)   { return 5, "Outbox.mu" }
