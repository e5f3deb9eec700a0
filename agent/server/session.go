// Package server is the agent's side of the socket: one session per
// connection, which reads its requests, keeps them in order, checks them
// against the access rules and answers them, and keeps handles to the
// session's holds and waits. Everything the agent knows of a name is the
// lock manager's (agent/locks), which the server asks through lockManager
// and which calls a session back through locks.Client.
package server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/lock-agent/lock-agent/agent/acl"
	"github.com/lock-agent/lock-agent/agent/locks"
	"github.com/lock-agent/lock-agent/agent/outbox"
	"github.com/lock-agent/lock-agent/agent/socket"
	"github.com/lock-agent/lock-agent/agent/status"
	"github.com/lock-agent/lock-agent/internal/lockorder"
	"github.com/lock-agent/lock-agent/protocol"
	"github.com/lock-agent/lock-agent/quorum"
	"github.com/lock-agent/lock-agent/quorum/clock"
	"github.com/lock-agent/lock-agent/renewal"
)

// lockManager is what the server asks of the lock manager (locks.Manager),
// which owns every hold's record, every wait and each name's state: a
// session keeps handles to its holds and waits, and the order of its
// replies. The manager reaches a session through locks.Client.
type lockManager interface {
	// A LOCK (lock.go): a lent record, else a wait in the name's queue.
	LendCached(c locks.Client, l protocol.Lock, who quorum.Who, lend bool) (h *locks.Hold, r locks.Result, ok bool, after <-chan struct{})
	NewWaiter(c locks.Client, tag string, l protocol.Lock, who quorum.Who, many bool, after <-chan struct{}) *locks.Waiter
	Join(w *locks.Waiter) error
	WithdrawWith(w *locks.Waiter, r locks.Result)
	StartHold(c locks.Client, w *locks.Waiter, holder string, g quorum.Grant) (*locks.Hold, locks.Result)
	Validity(h *locks.Hold) (time.Duration, bool)
	// A hold's end: a loss found, an UNLOCK, a downgrade, a closing session.
	LostNow(h *locks.Hold) (renewal.Loss, bool)
	AfterLost(h *locks.Hold, loss renewal.Loss, told uint64)
	Forget(h *locks.Hold) (handOver bool)
	GiveBack(h *locks.Hold) bool
	LetGo(ctx context.Context, h *locks.Hold, rollback bool)
	Downgraded(h *locks.Hold)
	Downgrade(ctx context.Context, h *locks.Hold) error
	ReleaseAll(holds map[locks.HoldKey]*locks.Hold)
	// EXTEND, SET, WHO, CHECK.
	SetEnd(h *locks.Hold, end time.Time) (time.Duration, bool)
	SetValue(ctx context.Context, h *locks.Hold, value string) (held bool, err error)
	Holders(ctx context.Context, name string) ([]quorum.Record, error)
	Check(ctx context.Context, name string, fence uint64) (bool, error)
	// OBSERVE, UNOBSERVE, and a closing session's observations.
	Observe(c locks.Client, name string, limit int, ok []byte) error
	Unobserve(c locks.Client, name string)
	UnobserveAll(c locks.Client)
	// STATUS: the live holds and the waiting LOCKs.
	Tally() (holds, waiters int)
}

// Config is what the server takes of the agent's config.
type Config struct {
	AgentID string
	// Version is the agent's, reported by HELLO and STATUS.
	Version string
	// LockDelay is lock.lock_delay: the delay= of a LOCK that gives none.
	LockDelay time.Duration
	// Settings are the settings every master records (agent.ClusterSettings),
	// as STATUS shows them.
	Settings string
	// RevokeBound is how long REVOKE waits for the holds it revoked to end.
	RevokeBound time.Duration
}

// Limits are the limits a session is held to. A SIGHUP may change them
// (SetLive).
type Limits struct {
	MaxSessions, MaxSessionsPerUID, MaxHoldsPerSession int
	// IdleTimeout closes a session that had no hold, no wait and no request
	// for that long; 0 never does.
	IdleTimeout time.Duration
}

// live is what a SIGHUP changes: replaced whole, never changed in place,
// so the request paths read it with no lock.
type live struct {
	limits Limits
	acl    *acl.ACL
}

// Server is the agent's side of the socket: the open sessions, and what
// they answer with besides the lock manager (the limits and access rules
// in force, the masters' status). The agent composes it with the manager.
type Server struct {
	cfg     Config
	live    atomic.Pointer[live]
	log     hclog.Logger
	clock   clock.Clock
	cluster *quorum.Cluster // HELLO, STATUS, and the reads of WHO and REVOKE
	metrics *locks.Metrics
	manager lockManager

	// mu guards the sessions and stopping. It is a leaf: it takes no other
	// mutex, and may be taken under any (see the lock order at session.mu),
	// so lockorder does not track it.
	mu          sync.Mutex
	sessions    map[uint64]*session
	uidSessions map[int]int // open sessions per peer uid
	nextSession uint64
	stopping    bool
	runCtx      context.Context
	sessionsWG  sync.WaitGroup
}

// New makes the server of an agent's sessions: the manager is the agent's
// lock manager, cluster its masters; limits and rules are in force until
// SetLive. It serves nothing until Start.
func New(cfg Config, limits Limits, rules *acl.ACL, log hclog.Logger, clk clock.Clock, cluster *quorum.Cluster, m *locks.Metrics, manager *locks.Manager) *Server {
	v := &Server{cfg: cfg, log: log, clock: clk, cluster: cluster, metrics: m, manager: manager,
		sessions: map[uint64]*session{}, uidSessions: map[int]int{}}
	v.live.Store(&live{limits: limits, acl: rules})
	return v
}

// SetLive puts limits and rules in force for the requests that arrive
// after it returns. What was admitted before is kept; a session's
// idle_timeout is measured anew.
func (v *Server) SetLive(limits Limits, rules *acl.ACL) {
	old := v.live.Swap(&live{limits: limits, acl: rules})
	if old.limits.IdleTimeout == limits.IdleTimeout {
		return
	}
	for _, s := range v.openSessions() {
		s.armIdle()
	}
}

// Start gives the sessions the context they run under.
func (v *Server) Start(ctx context.Context) {
	v.mu.Lock()
	v.runCtx = ctx
	v.mu.Unlock()
}

// limits are the limits in force now.
func (v *Server) limits() Limits { return v.live.Load().limits }

// CloseAll opens no more sessions, pushes LOST and BYE to every open one,
// closes them, and waits until each released its holds, or until grace
// fires.
func (v *Server) CloseAll(grace <-chan time.Time) {
	v.mu.Lock()
	v.stopping = true
	sessions := v.sessionsLocked()
	v.mu.Unlock()
	var byes sync.WaitGroup // at once: a session may wait up to byeWait for its multi-locks
	for _, s := range sessions {
		byes.Go(func() { s.bye("shutdown") })
	}
	byes.Wait()
	done := make(chan struct{})
	go func() {
		v.sessionsWG.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-grace:
		v.log.Warn("sessions did not finish releasing in time; their leases will expire")
	}
}

// openSessions is a snapshot of the open sessions, for work on each
// that must not hold server.mu (it takes session.mu, or may wait).
func (v *Server) openSessions() []*session {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.sessionsLocked()
}

// sessionsLocked is openSessions with server.mu held.
func (v *Server) sessionsLocked() []*session {
	return slices.Collect(maps.Values(v.sessions))
}

// Counts is a snapshot for STATUS.
type Counts struct {
	Sessions, Holds, Waiters int
}

func (v *Server) Counts() Counts {
	holds, waiters := v.manager.Tally()
	v.mu.Lock()
	defer v.mu.Unlock()
	return Counts{Sessions: len(v.sessions), Holds: holds, Waiters: waiters}
}

// Clients is openSessions as the lock manager sees them.
func (v *Server) Clients() []locks.Client {
	sessions := v.openSessions()
	cs := make([]locks.Client, len(sessions))
	for i, s := range sessions {
		cs[i] = s
	}
	return cs
}

// Tolerates is how many masters may be down, or sit out a quarantine,
// while the agent still grants: those beyond the quorum (n - (n/2+1)).
// One master tolerates none, nor do two; an even count tolerates no more
// than one master fewer would.
func (v *Server) Tolerates() int { return v.cluster.Size() - v.cluster.Quorum() }

// session is one client connection. Every hold and wait it has ends when
// the connection does.
type session struct {
	srv     *Server
	manager lockManager
	id      uint64
	conn    *net.UnixConn
	cred    socket.Cred
	log     hclog.Logger
	ctx     context.Context // ends when the session closes (with errSessionGone): cancels its waits
	cancel  context.CancelCauseFunc
	reqs    sync.WaitGroup // requests not answered yet: working in their own goroutine, or waiting LOCKs
	out     *outbox.Outbox

	// lastRequest is when the last request line arrived (UnixNano).
	lastRequest atomic.Int64

	// peer is the uid's user and groups, looked up once when an access
	// rule first needs them (see allow).
	peerOnce sync.Once
	peer     acl.Peer

	// The lock order, every mutex of agent/server, agent/locks,
	// agent/outbox and renewal, outermost first. A goroutine that holds one
	// takes only the ones below it. A build with the lockorder tag checks it
	// (internal/lockorder, which lists it too).
	//
	//	turn                       one request on a hold, in line order (not a mutex)
	//	└ session.mu               one session: its holds, its unanswered LOCKs
	//	  └ Manager.mu             every name's record (agent/locks)
	//	    └ queue.mu             one name's waiters
	//	      └ Watchdog.mu        the watched records (renewal)
	//	        └ Outbox.mu        one session's lines for its client (agent/outbox)
	//	leaves, under any of them: server.mu, recentNames.mu, quorum's mutexes
	//
	//  0. A turn (order.go), not a mutex (lockorder does not see it): a
	//     request on a hold holds one from its line's dispatch until it is
	//     finished (a LOCK: answered), across its rounds on the masters. A
	//     request waits for the turns before it (and a WHO for its name's
	//     releases to land) with no mutex held, and turns are taken in line
	//     order, so none waits for one taken after it. Its fields are
	//     guarded by session.mu.
	//  1. session.mu (this one): the session's holds, and its unanswered
	//     LOCKs (pendingLock: each one's turn, wait and multi-lock).
	//     A grant, a pass to a local waiter and an UNLOCK's undoing decide
	//     under it, and under it take the locks below: the session holds it
	//     when it calls the lock manager's methods that say so, and the
	//     manager's calls into a session (locks.Client) take it themselves,
	//     with none of the manager's locks held.
	//  2. Manager.mu (agent/locks): manager.names, the one record per
	//     name, with all that hangs from it: the live exclusive lock, the
	//     queue's place, the lending, a run or a cache (locks/lend.go, with
	//     its reserving flag), the notify=wanted holds, the waiting record,
	//     the observation and each session's observing (manager.observing:
	//     locks/watch.go); the live holders of the watchdog's records
	//     (renewal.Hold.Owner) and their count; a name's lost holds whose
	//     records are yet to be released (locks/hold.go: lostRelease),
	//     which its contender waits for, across their release rounds, with
	//     no mutex held.
	//  3. queue.mu: one name's waiters, their states and queue entries.
	//  4. Watchdog.mu (renewal): the watched records. The watchdog calls
	//     nothing of the agent's with it held: OnLost runs without it.
	//  5. Outbox.mu (agent/outbox): the session's lines for the client,
	//     taken last of all.
	//     Nothing is sent (send may wait for room) with another lock held,
	//     and a push or a reply, which never wait, may be queued under the
	//     locks above: a LOST under session.mu, so that it comes before any
	//     reply that looks at the session's holds.
	//
	// server.mu (the open sessions, and whether the agent is stopping) and
	// recentNames.mu (locks/cache.go: the names other agents wanted lately, and
	// those this agent released lately) are leaves: each may be taken under
	// any of these and takes none, so lockorder does not track them.
	//
	// quorum's mutexes (the masters' connections, subscriptions, a
	// clock.Fake's) may be taken under these and take none of them: quorum
	// never calls back into the agent with one held (a clock.Fake runs an
	// AfterFunc's function within Advance, with its own mutex let go).
	mu    lockorder.Mutex[lockorder.Session]
	idle  clock.Timer // the idle_timeout check; nil until there is one (see armIdle)
	holds map[locks.HoldKey]*locks.Hold
	// locks is the session's unanswered LOCKs, by tag: one record each,
	// its turn, its wait and, for a multi-lock, its goroutine's cancel (see
	// pendingLock). waiting counts those with a wait, multis those that are
	// multi-locks; kept by the functions that set and clear them alone.
	locks   map[string]*pendingLock
	waiting int
	multis  int
	// multisEnded, while the agent stops, is closed when the last multi-lock
	// under way has answered (see bye).
	multisEnded chan struct{}
	releasing   map[string]*pendingRelease // names being released in the masters; nil when none
	// turns is the last unfinished request on each hold that later
	// requests on it wait for, and behind the requests waiting for their
	// turn (see order.go); turnsEnded, while the agent stops, is closed
	// when turns empties (see bye).
	turns      map[locks.HoldKey]*turn
	turnSeq    uint64 // the last turn's seq
	turnsEnded chan struct{}
	behind     int
	inflight   int // requests working in their own goroutine
	// burst: more than burstInflight requests were in flight at once
	// since they last all ended (see shrinkLocked).
	burst bool
	// recheckIdle: an idle check found requests in flight, so the last
	// of them to finish looks again (its reply may already be out).
	recheckIdle bool
	closing     bool
	client      string
	// shutdown: the agent is stopping and said so to this session (see
	// bye); whatever ends its waits from then on ends them SHUTTING_DOWN.
	shutdown atomic.Bool
}

// pendingRelease is this session's releases of one name still on their
// way to the masters. A LOCK of that name that arrives meanwhile tries the
// masters only once they landed, so that UNLOCK x then LOCK x is a
// release, then a grant.
type pendingRelease struct {
	n    int
	done chan struct{} // closed when n drops to 0
}

// Open starts a session on conn, unless the agent is stopping or a
// max_sessions limit refuses it: then conn is told why and closed.
func (v *Server) Open(conn *net.UnixConn) {
	cred, err := socket.PeerCred(conn)
	if err != nil {
		v.log.Debug("peer credentials unavailable", "error", err)
	}
	v.mu.Lock()
	var refuse error
	switch lim := v.limits(); {
	case v.stopping:
		refuse = locks.ErrAgentStopping
	case len(v.sessions) >= lim.MaxSessions:
		refuse = protocol.Errorf(protocol.ErrLimit, "too many sessions (max_sessions=%d)", lim.MaxSessions)
	case v.uidSessions[cred.UID] >= lim.MaxSessionsPerUID:
		refuse = protocol.Errorf(protocol.ErrLimit, "too many sessions of uid %d (max_sessions_per_uid=%d)", cred.UID, lim.MaxSessionsPerUID)
	}
	if refuse != nil {
		v.mu.Unlock()
		conn.Write(protocol.Failed{Tag: protocol.NoTag, Err: refuse}.Bytes())
		conn.Close()
		return
	}
	v.nextSession++
	s := &session{srv: v, manager: v.manager, id: v.nextSession, conn: conn, cred: cred, holds: map[locks.HoldKey]*locks.Hold{}}
	s.log = v.log.Named("session").With("session", s.id, "pid", cred.PID, "uid", cred.UID)
	if s.out, err = outbox.New(conn, s.log); err != nil {
		v.mu.Unlock()
		conn.Close()
		return
	}
	s.lastRequest.Store(v.clock.Now().UnixNano())
	s.ctx, s.cancel = context.WithCancelCause(v.runCtx)
	v.sessions[s.id] = s
	v.uidSessions[cred.UID]++
	v.sessionsWG.Add(1)
	v.mu.Unlock()
	s.log.Debug("opened", "gid", cred.GID)
	s.armIdle()
	go s.serve()
}

// errLineTooLong answers a line over protocol.MaxLine, before BYE.
var errLineTooLong = protocol.Errorf(protocol.ErrBadRequest, "line too long (max %d bytes)", protocol.MaxLine)

// serve reads request lines until the connection ends, then releases
// everything the session holds.
func (s *session) serve() {
	defer s.close()
	r := bufio.NewReaderSize(s.conn, protocol.MaxLine+2)
	for {
		s.out.AwaitRoom()
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			s.send(protocol.Failed{Tag: protocol.NoTag, Err: errLineTooLong}.Bytes())
			s.bye("protocol")
			return
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				s.log.Debug("read failed", "error", err)
			}
			return
		}
		line = bytes.TrimSuffix(line[:len(line)-1], []byte{'\r'})
		if len(line) > protocol.MaxLine {
			s.send(protocol.Failed{Tag: protocol.NoTag, Err: errLineTooLong}.Bytes())
			s.bye("protocol")
			return
		}
		s.lastRequest.Store(s.srv.clock.Now().UnixNano())
		if quit := s.dispatch(string(line)); quit {
			return
		}
	}
}

// dispatch answers one line. Every request takes effect here, in the order
// its line arrived: a LOCK joins its queue, an UNLOCK drops its hold. Only
// the part that waits (for the name, or for the masters) runs in its own
// goroutine, so a waiting LOCK never holds up the lines after it, but for
// the requests on its hold, which wait for its answer (see order.go).
func (s *session) dispatch(line string) (quit bool) {
	req, err := protocol.Parse(line)
	if req == nil && err == nil {
		return false
	}
	if err != nil {
		s.send(protocol.Failed{Tag: req.Tag, Err: err}.Bytes())
		return false
	}
	if req.Verb == protocol.VerbQuit {
		if err := req.NoArgs(); err != nil {
			s.send(protocol.Failed{Tag: req.Tag, Err: err}.Bytes())
			return false
		}
		// close releases the holds, then closes the connection: a client
		// that sees it close knows they are released.
		s.send(protocol.Done{Tag: req.Tag}.Bytes())
		return true
	}
	if err := s.answer(req); err != nil {
		s.send(protocol.Failed{Tag: req.Tag, Err: err}.Bytes())
	}
	return false
}

func (s *session) answer(req *protocol.Request) error {
	switch req.Verb {
	case protocol.VerbHello:
		return s.hello(req)
	case protocol.VerbPing:
		if err := req.NoArgs(); err != nil {
			return err
		}
		s.send(protocol.Done{Tag: req.Tag}.Bytes())
		return nil
	case protocol.VerbLock:
		return s.lockInTurn(req)
	case protocol.VerbUnlock:
		return s.unlockInTurn(req)
	case protocol.VerbExtend:
		return s.extendInTurn(req)
	case protocol.VerbCancel:
		return s.cancelWait(req)
	case protocol.VerbHolds:
		return s.listHolds(req)
	case protocol.VerbStatus:
		return s.status(req)
	case protocol.VerbWho:
		return s.whoInTurn(req)
	case protocol.VerbRevoke:
		return s.revoke(req)
	case protocol.VerbSet:
		return s.setInTurn(req)
	case protocol.VerbCheck:
		return s.check(req)
	case protocol.VerbObserve:
		return s.observe(req)
	case protocol.VerbUnobserve:
		return s.unobserve(req)
	}
	return protocol.Errorf(protocol.ErrUnknownVerb, "no verb %s", req.Verb)
}

// spawn finishes request tag in its own goroutine; an error is its reply.
func (s *session) spawn(tag string, f func() error) {
	s.mu.Lock()
	s.inflight++
	s.burst = s.burst || s.inflight > burstInflight
	s.mu.Unlock()
	s.reqs.Add(1)
	go func() {
		defer s.reqs.Done()
		if err := f(); err != nil {
			s.send(protocol.Failed{Tag: tag, Err: err}.Bytes())
		}
		s.mu.Lock()
		s.inflight--
		if s.inflight == 0 && s.burst {
			s.shrinkLocked()
		}
		recheck := s.inflight == 0 && s.recheckIdle
		if recheck {
			s.recheckIdle = false
		}
		s.mu.Unlock()
		if recheck {
			s.checkIdle()
		}
	}()
}

// burstInflight is how many requests in flight at once make a burst.
const burstInflight = 64

// shrinkLocked drops the session's per-request maps, emptied now that a
// burst's requests all ended, for new ones: a Go map never shrinks, so
// after 1,000 pipelined LOCKs each kept room for 1,000 entries, ~190 B
// per hold of a 100 x 1,000 burst. (Only after a burst: a map made anew
// for each request would be an allocation per request.) s.mu is held.
func (s *session) shrinkLocked() {
	s.burst = false
	if len(s.turns) == 0 {
		s.turns = nil // takeTurnLocked makes it again
	}
	if len(s.locks) == 0 {
		s.locks = nil // pendingLocked makes it again
	}
}

// checkIdle closes the session if it has had no hold, no wait and no
// request for idle_timeout; else it looks again when it next could be.
func (s *session) checkIdle() {
	// The timeout is read and the timer set under s.mu, as armIdle does
	// after a SIGHUP: a new timeout is never overwritten by the old one.
	s.mu.Lock()
	limit := s.srv.limits().IdleTimeout
	quiet := s.srv.clock.Now().Sub(time.Unix(0, s.lastRequest.Load()))
	busy := len(s.holds) > 0 || s.waiting > 0 || len(s.turns) > 0 || s.inflight > 0
	idle := false
	switch {
	case s.closing, limit <= 0: // a SIGHUP turned it off
	case busy:
		s.idle.Reset(limit)
		s.recheckIdle = s.inflight > 0
	case quiet < limit:
		s.idle.Reset(limit - quiet)
	default:
		idle = true
	}
	s.mu.Unlock()
	if idle {
		s.log.Debug("closing an idle session", "idle", quiet)
		s.bye("idle")
	}
}

// armIdle starts the idle_timeout check, or has it look again at once when
// a SIGHUP changed the timeout.
func (s *session) armIdle() {
	d := s.srv.limits().IdleTimeout
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closing:
	case d <= 0:
		if s.idle != nil {
			s.idle.Stop()
		}
	case s.idle == nil:
		s.idle = s.srv.clock.AfterFunc(d, s.checkIdle)
	default:
		s.idle.Reset(0) // checkIdle measures the quiet time against the new timeout
	}
}

// send, Reply and Push queue a line for the client: see outbox.
func (s *session) send(line []byte)  { s.out.Send(line) }
func (s *session) Reply(line []byte) { s.out.Reply(line) }
func (s *session) Push(line []byte)  { s.out.Push(line) }

// SessionID, AwaitWritten and Logger: see locks.Client.
func (s *session) SessionID() uint64    { return s.id }
func (s *session) Logger() hclog.Logger { return s.log }
func (s *session) AwaitWritten(told uint64, until <-chan time.Time) {
	s.out.AwaitWritten(told, until)
}

// byeWait bounds how long a stopping agent waits for a session's
// multi-locks to answer SHUTTING_DOWN before it says BYE.
const byeWait = time.Second

// bye tells the client the agent is closing the connection and closes it.
// When the agent is stopping, it first pushes LOST for every hold and
// answers every waiting LOCK ERR SHUTTING_DOWN, so that no request the
// client is waiting for is left without an answer.
func (s *session) bye(reason string) {
	if reason == "shutdown" {
		s.shutdown.Store(true)
		s.mu.Lock()
		s.closing = true
		holds := make([]*locks.Hold, 0, len(s.holds))
		for _, h := range s.holds {
			holds = append(holds, h)
		}
		waits := s.waitsToEndLocked()
		var multisEnded chan struct{}
		if s.multis > 0 {
			s.multisEnded = make(chan struct{})
			multisEnded = s.multisEnded
		}
		for _, p := range s.locks {
			if p.multi != nil {
				p.multi(locks.ErrAgentStopping)
			}
		}
		var turnsEnded chan struct{}
		if len(s.turns) > 0 {
			s.turnsEnded = make(chan struct{})
			turnsEnded = s.turnsEnded
		}
		s.mu.Unlock()
		for _, h := range holds {
			s.Push(locks.LostLine(h, renewal.Loss{Reason: renewal.ReasonShutdown}))
		}
		for _, w := range waits {
			s.manager.WithdrawWith(w, locks.Result{Err: locks.ErrAgentStopping})
		}
		s.awaitAnswers(multisEnded, turnsEnded)
	}
	s.Push(protocol.Bye{Reason: reason}.Bytes())
	s.out.FlushAndClose()
}

// awaitAnswers waits, at most byeWait, until each of ended (nil if there
// is nothing to wait for) is closed: the session's multi-locks, and the
// requests that waited for an earlier LOCK (see order.go), have answered.
func (s *session) awaitAnswers(ended ...chan struct{}) {
	t := time.NewTimer(byeWait)
	defer t.Stop()
	for _, c := range ended {
		if c == nil {
			continue
		}
		select {
		case <-c:
		case <-t.C:
			return
		}
	}
}

// close ends the session: its waits are cancelled and its holds released in
// the masters at once, before anything else can hold it up.
func (s *session) close() {
	s.cancel(errSessionGone)
	s.manager.UnobserveAll(s)
	s.mu.Lock()
	if s.idle != nil {
		s.idle.Stop()
	}
	s.closing = true // install refuses grants that arrive from now on
	holds := s.holds
	s.holds = map[locks.HoldKey]*locks.Hold{}
	waits := s.waitsToEndLocked()
	s.mu.Unlock()
	for _, w := range waits {
		s.manager.WithdrawWith(w, locks.Result{Err: s.endedBy()})
	}
	s.manager.ReleaseAll(holds)
	s.conn.SetWriteDeadline(time.Now().Add(outbox.CloseFlush))
	s.reqs.Wait()
	s.srv.mu.Lock()
	delete(s.srv.sessions, s.id)
	if s.srv.uidSessions[s.cred.UID]--; s.srv.uidSessions[s.cred.UID] <= 0 {
		delete(s.srv.uidSessions, s.cred.UID)
	}
	s.srv.mu.Unlock()
	s.out.FlushAndClose()
	<-s.out.Closed()
	s.log.Debug("closed", "released", len(holds))
	s.srv.sessionsWG.Done()
}

func (s *session) hello(req *protocol.Request) error {
	h, err := protocol.ParseHello(req)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.client = h.Client
	s.mu.Unlock()
	if h.Client != "" {
		s.log.Debug("hello", "client", h.Client)
	}
	s.send(protocol.Welcome{Tag: req.Tag, Agent: s.srv.cfg.Version, Session: s.id, Masters: s.srv.cluster.Size(), Quorum: s.srv.cluster.Quorum()}.Bytes())
	return nil
}

func (s *session) status(req *protocol.Request) error {
	if err := req.NoArgs(); err != nil {
		return err
	}
	for _, m := range s.srv.cluster.Status() {
		s.send(status.Master(req.Tag, m).Bytes())
	}
	c := s.srv.Counts()
	s.send(protocol.Status{Tag: req.Tag, Agent: s.srv.cfg.Version, ID: s.srv.cfg.AgentID, Sessions: c.Sessions,
		Holds: c.Holds, Waiters: c.Waiters, Quorum: s.srv.cluster.Quorum(), Tolerates: s.srv.Tolerates(),
		LockDelay: s.srv.cfg.LockDelay, Settings: s.srv.cfg.Settings,
		SettingsDiffer: status.SettingsDiffer(s.srv.cluster.SettingsProblem())}.Bytes())
	return nil
}

// allow checks a request against the rules in force now (a SIGHUP may
// replace them). The peer's groups are looked up once per session, when a
// rule first needs them.
func (s *session) allow(verb string, names ...string) error {
	rules := s.srv.live.Load().acl
	if rules == nil {
		return nil
	}
	s.peerOnce.Do(func() { s.peer = acl.Resolve(s.cred.UID, s.cred.GID) })
	err := rules.Allow(s.peer, verb, names...)
	if err != nil {
		s.log.Debug("denied", "reason", err)
	}
	return err
}

// allowRevoke says whether the peer may REVOKE name: a rule must name the
// verb revoke (a rule without verbs does not grant it); without an acl
// block, only uid 0 may.
func (s *session) allowRevoke(name string) error {
	if s.srv.live.Load().acl == nil {
		if s.cred.UID != 0 {
			return protocol.Errorf(protocol.ErrDenied, "revoke is for uid 0 when there is no acl block; uid %d", s.cred.UID)
		}
		return nil
	}
	return s.allow("revoke", name)
}

// errSessionGone ends the waits of a closing session. The client may have
// only shut its writing side, so it is still told.
var errSessionGone = protocol.Errorf(protocol.ErrCancelled, "session closed")

// errCancelled ends a wait that CANCEL withdrew.
var errCancelled = protocol.Errorf(protocol.ErrCancelled, "cancelled by CANCEL")

// What the agent's tests look at (agent/export_test.go).

// QueuedLines is the most lines any open session has waiting for its
// writer.
func (v *Server) QueuedLines() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	most := 0
	for _, s := range v.sessions {
		most = max(most, s.out.Queued())
	}
	return most
}

// Unsaid is how many sessions are neither closed nor told BYE: a session
// counts no more from the moment its BYE is queued.
func (v *Server) Unsaid() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	open := 0
	for _, s := range v.sessions {
		if s.out.Open() {
			open++
		}
	}
	return open
}
