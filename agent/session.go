package agent

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/lock-agent/lock-agent/protocol"
	"github.com/lock-agent/lock-agent/quorum"
)

// Cred is the peer's credentials from SO_PEERCRED (-1 where unknown).
type Cred struct {
	PID, UID, GID int
}

// outQueue is how many lines may wait for the writer. Replies beyond it
// wait (the agent stops reading that client's requests: backpressure);
// an unsolicited push beyond it closes the session, since a client that
// cannot be told its lock is lost must not go on holding anything.
const outQueue = 4096

// closeFlush bounds how long a closing session's last lines may take to
// write: a client that stopped reading cannot hold up its own cleanup.
const closeFlush = 2 * time.Second

// holdKey identifies a hold within a session.
type holdKey struct {
	name, owner string
}

// session is one client connection. Every hold and wait it has ends when
// the connection does.
type session struct {
	a      *Agent
	id     uint64
	conn   *net.UnixConn
	cred   Cred
	log    hclog.Logger
	ctx    context.Context // ends when the session closes: cancels its waits
	cancel context.CancelFunc

	out     chan []byte   // lines for the writer; nil is "flush and close"
	dead    chan struct{} // closed when the writer stops
	reqs    sync.WaitGroup
	mu      sync.Mutex
	holds   map[holdKey]*hold
	waits   map[string]*waiter // by tag, for CANCEL
	closing bool
	client  string
}

func (a *Agent) open(conn *net.UnixConn) {
	cred, err := peerCred(conn)
	if err != nil {
		a.log.Debug("peer credentials unavailable", "error", err)
	}
	a.mu.Lock()
	if a.stopping || len(a.sessions) >= a.cfg.Limits.MaxSessions {
		stopping := a.stopping
		a.mu.Unlock()
		if stopping {
			conn.Write(protocol.ErrorLine(protocol.NoTag, protocol.Errorf(protocol.ErrShuttingDown, "agent is stopping")))
		} else {
			conn.Write(protocol.ErrorLine(protocol.NoTag, protocol.Errorf(protocol.ErrLimit, "too many sessions (max_sessions=%d)", a.cfg.Limits.MaxSessions)))
		}
		conn.Close()
		return
	}
	a.nextSession++
	s := &session{a: a, id: a.nextSession, conn: conn, cred: cred, out: make(chan []byte, outQueue), dead: make(chan struct{}),
		holds: map[holdKey]*hold{}, waits: map[string]*waiter{}}
	s.ctx, s.cancel = context.WithCancel(a.runCtx)
	s.log = a.log.Named("session").With("session", s.id, "pid", cred.PID, "uid", cred.UID)
	a.sessions[s.id] = s
	a.sessionsWG.Add(1)
	a.mu.Unlock()
	s.log.Debug("opened", "gid", cred.GID)
	go s.write()
	go s.serve()
}

// serve reads request lines until the connection ends, then releases
// everything the session holds.
func (s *session) serve() {
	defer s.close()
	r := bufio.NewReaderSize(s.conn, protocol.MaxLine+2)
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			s.send(protocol.ErrorLine(protocol.NoTag, protocol.Errorf(protocol.ErrBadRequest, "line too long (max %d bytes)", protocol.MaxLine)))
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
			s.send(protocol.ErrorLine(protocol.NoTag, protocol.Errorf(protocol.ErrBadRequest, "line too long (max %d bytes)", protocol.MaxLine)))
			s.bye("protocol")
			return
		}
		if quit := s.dispatch(string(line)); quit {
			return
		}
	}
}

// dispatch answers one line. Verbs that talk to the masters run in their own
// goroutine, so a waiting LOCK never holds up the lines after it.
func (s *session) dispatch(line string) (quit bool) {
	req, err := protocol.Parse(line)
	if req == nil && err == nil {
		return false
	}
	if err != nil {
		s.send(protocol.ErrorLine(req.Tag, err))
		return false
	}
	switch req.Verb {
	case protocol.VerbLock, protocol.VerbUnlock, protocol.VerbExtend, protocol.VerbWho:
		s.reqs.Add(1)
		go func() {
			defer s.reqs.Done()
			s.answer(req)
		}()
	case protocol.VerbQuit:
		if err := req.NoArgs(); err != nil {
			s.send(protocol.ErrorLine(req.Tag, err))
			return false
		}
		s.send(protocol.Reply(req.Tag, protocol.KindOK).Bytes())
		s.flushAndClose()
		return true
	default:
		s.answer(req)
	}
	return false
}

func (s *session) answer(req *protocol.Request) {
	var err error
	switch req.Verb {
	case protocol.VerbHello:
		err = s.hello(req)
	case protocol.VerbPing:
		if err = req.NoArgs(); err == nil {
			s.send(protocol.Reply(req.Tag, protocol.KindOK).Bytes())
		}
	case protocol.VerbLock:
		err = s.lock(req)
	case protocol.VerbUnlock:
		err = s.unlock(req)
	case protocol.VerbExtend:
		err = s.extend(req)
	case protocol.VerbCancel:
		err = s.cancelWait(req)
	case protocol.VerbHolds:
		err = s.listHolds(req)
	case protocol.VerbStatus:
		err = s.status(req)
	case protocol.VerbWho:
		err = s.who(req)
	default:
		err = protocol.Errorf(protocol.ErrUnknownVerb, "no verb %s", req.Verb)
	}
	if err != nil {
		s.send(protocol.ErrorLine(req.Tag, err))
	}
}

// send queues a reply line for the writer, waiting while the queue is
// full. It must not be called with s.mu held.
func (s *session) send(line []byte) {
	select {
	case s.out <- line:
	case <-s.dead:
	}
}

// push queues an unsolicited line without ever waiting: it is called from
// the watchdog and the shutdown path, which serve every session. A session
// whose queue is full is closed instead.
func (s *session) push(line []byte) {
	select {
	case s.out <- line:
	case <-s.dead:
	default:
		s.log.Warn("client is not reading; closing the session", "queued", outQueue)
		s.conn.Close()
	}
}

// flushAndClose asks the writer to write what is queued, then close.
func (s *session) flushAndClose() {
	select {
	case s.out <- nil:
	case <-s.dead:
	default:
		s.conn.Close()
	}
}

// write sends queued lines, as many per system call as are waiting.
func (s *session) write() {
	defer close(s.dead)
	var buf []byte
	for line := range s.out {
		closing := line == nil
		buf = append(buf[:0], line...)
	more:
		for !closing && len(buf) < 64<<10 {
			select {
			case l := <-s.out:
				if l == nil {
					closing = true
				}
				buf = append(buf, l...)
			default:
				break more
			}
		}
		if len(buf) > 0 {
			if _, err := s.conn.Write(buf); err != nil {
				s.conn.Close()
				return
			}
		}
		if closing {
			s.conn.Close()
			return
		}
	}
}

// bye tells the client the agent is closing the connection (pushing LOST for
// every hold first when the agent is stopping) and closes it.
func (s *session) bye(reason string) {
	if reason == "shutdown" {
		s.mu.Lock()
		s.closing = true
		holds := make([]*hold, 0, len(s.holds))
		for _, h := range s.holds {
			holds = append(holds, h)
		}
		s.mu.Unlock()
		for _, h := range holds {
			s.push(lostLine(h, "shutdown"))
		}
	}
	s.push(protocol.Push("BYE").Str("reason", reason).Bytes())
	s.flushAndClose()
}

// close ends the session: its waits are cancelled and its holds released in
// the masters at once, before anything else can hold it up.
func (s *session) close() {
	s.cancel()
	s.mu.Lock()
	s.closing = true // install refuses grants that arrive from now on
	holds := s.holds
	s.holds = map[holdKey]*hold{}
	s.mu.Unlock()
	s.a.releaseAll(holds)
	s.conn.SetWriteDeadline(time.Now().Add(closeFlush))
	s.reqs.Wait()
	s.a.mu.Lock()
	delete(s.a.sessions, s.id)
	s.a.mu.Unlock()
	s.flushAndClose()
	<-s.dead
	s.log.Debug("closed", "released", len(holds))
	s.a.sessionsWG.Done()
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
	s.send(protocol.Reply(req.Tag, protocol.KindOK).Int("proto", protocol.Version).Str("agent", Version).
		Int("session", int64(s.id)).Int("masters", int64(s.a.cluster.Size())).Int("quorum", int64(s.a.cluster.Quorum())).Bytes())
	return nil
}

func (s *session) status(req *protocol.Request) error {
	if err := req.NoArgs(); err != nil {
		return err
	}
	for _, m := range s.a.cluster.Status() {
		l := protocol.Reply(req.Tag, protocol.KindData).Str("master", m.Name).Str("address", m.Address).Str("state", string(m.State))
		switch m.State {
		case quorum.StateQuarantined:
			l.Int("quarantine_left", m.QuarantineLeft.Milliseconds())
		case quorum.StateUnsafe, quorum.StateDown:
			l.Str("reason", wordOf(m.Err))
		}
		s.send(l.Bytes())
	}
	c := s.a.counts()
	s.send(protocol.Reply(req.Tag, protocol.KindOK).Str("agent", Version).Str("id", s.a.cfg.AgentID).Int("sessions", int64(c.Sessions)).
		Int("holds", int64(c.Holds)).Int("waiters", int64(c.Waiters)).Int("quorum", int64(s.a.cluster.Quorum())).Bytes())
	return nil
}

// wordOf makes free text one protocol value: no spaces, no '='.
func wordOf(s string) string {
	return strings.Map(func(r rune) rune {
		if r == ' ' || r == '=' {
			return '_'
		}
		return r
	}, s)
}
