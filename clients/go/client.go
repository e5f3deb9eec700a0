// Package lockagent is the Go client of lock-agent, the per-host daemon that
// gives local processes distributed locks over a Unix socket. It has no
// dependencies beyond the standard library.
//
// One Client is one connection, safe for use by many goroutines: requests are
// multiplexed by tag and one reader goroutine routes replies and pushes. A
// Lock stays held while the Client's connection is open (the agent renews
// it); when the agent reports it lost, or the connection drops, its Done
// channel closes and its Context is cancelled.
//
//	c, err := lockagent.Dial(ctx, "")
//	l, err := c.Lock(ctx, "jobs/nightly", lockagent.Wait(5*time.Second))
//	defer l.Unlock(ctx) // releases even when ctx is cancelled by then
//	doWork(l.Context(), l.Fence())
//
// Beyond locks: Campaign elects a leader per name (a fair Lock with a Value;
// the fence is the term), Observe and Leader follow who leads, Proclaim
// changes the leader's value; NotifyWanted, Delay and MinHold shape a hold;
// Check asks whether a fence is current, Revoke ends holds anywhere.
package lockagent

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultSocket is where a system agent listens (lock-agent run with the
// default config).
const DefaultSocket = "/run/lock-agent/agent.sock"

// SocketPath returns where Dial("") connects: $LOCK_AGENT_SOCKET if set;
// else DefaultSocket if something exists there; else the socket of
// `lock-agent run -dev` (DevSocketPath).
func SocketPath() string {
	if p := os.Getenv("LOCK_AGENT_SOCKET"); p != "" {
		return p
	}
	if _, err := os.Stat(DefaultSocket); err == nil {
		return DefaultSocket
	}
	return DevSocketPath()
}

// DevSocketPath is where `lock-agent run -dev` listens:
// $XDG_RUNTIME_DIR/lock-agent/agent.sock, or, without XDG_RUNTIME_DIR,
// lock-agent-UID/agent.sock in os.TempDir() (/tmp unless $TMPDIR is set).
func DevSocketPath() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "lock-agent", "agent.sock")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("lock-agent-%d", os.Getuid()), "agent.sock")
}

// Client is one connection to the agent.
type Client struct {
	conn net.Conn
	wmu  sync.Mutex

	mu      sync.Mutex
	calls   map[string]*call
	locks   map[lockKey][]*Lock
	err     error // set once the connection is gone
	closed  chan struct{}
	nextTag atomic.Uint64
	owners  atomic.Uint64
	session string

	// obsMu orders the OBSERVE and UNOBSERVE lines of this connection with
	// the changes of observed they stand for (lock order: obsMu, then mu).
	obsMu    sync.Mutex
	observed map[string]*observation // under mu

	elections map[string]*candidacy // by name, under mu (see NewElection)
	shared    atomic.Bool           // SyscallConn was called: Close sends no QUIT
}

type lockKey struct{ name, owner string }

// reply is a final reply with the DATA lines that came before it.
type reply struct {
	kind   string            // OK, BUSY, ERR
	fields map[string]string // key=value words of the final line
	words  []string          // the final line's words after the tag
	data   []map[string]string
}

type call struct {
	done chan reply
	data []map[string]string
	// then, if set, sees the final reply in the reader, before any line
	// that follows it is routed. It must not block.
	then func(reply)
}

// Dial connects to the agent at path ("" means SocketPath()) and says HELLO.
// If nothing answers there, the error matches ErrConnect and says how to
// start an agent or point the client at one.
func Dial(ctx context.Context, path string) (*Client, error) {
	if path == "" {
		path = SocketPath()
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("%w at %s: %w; is the agent running? Start one with `lock-agent run -dev`, "+
			"or set LOCK_AGENT_SOCKET to the socket it prints (without it, clients try %s, then %s)",
			ErrConnect, path, err, DefaultSocket, DevSocketPath())
	}
	c := &Client{conn: conn, calls: map[string]*call{}, locks: map[lockKey][]*Lock{}, closed: make(chan struct{}),
		observed: map[string]*observation{}, elections: map[string]*candidacy{}}
	go c.read()
	name := "go"
	if len(os.Args) > 0 {
		name = sanitize(os.Args[0])
	}
	if err := checkClientName(name); err != nil {
		c.Close()
		return nil, err
	}
	r, err := c.do(ctx, "HELLO proto=1 client="+name)
	if err != nil {
		c.Close()
		return nil, err
	}
	c.session = r.fields["session"]
	return c, nil
}

// sanitize makes a client name (see checkClientName) of the program's name.
func sanitize(s string) string {
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		s = s[i+1:]
	}
	s = strings.Map(func(r rune) rune {
		if r > 0x7e || !checkWord(string(r), 1, "._:/@+-") {
			return '_'
		}
		return r
	}, s)
	if len(s) > 64 {
		s = s[:64]
	}
	if s == "" {
		s = "go"
	}
	return s
}

// quitGrace bounds how long Close waits for the agent to release and close
// the connection after QUIT.
var quitGrace = 10 * time.Second // a var for tests

// Close ends the connection: it says QUIT, and the agent releases every
// lock of the connection in the masters, then closes it; Close returns
// once it has, so that when Close returns the locks are released (or, if
// no master could be reached, left to expire), and another client may hold
// them already. If the agent does not close the connection within
// quitGrace (10s) of the QUIT, or refuses it, Close closes it itself (the
// agent then releases the locks as it does for any closed connection).
// Waiting Locks and Observe channels end with ErrClosed.
//
// After SyscallConn (another process may hold a copy of the connection, as
// the command `lock-agent exec` runs does), Close sends no QUIT: it closes
// this process's copy and returns, and the agent releases the locks once
// the last copy is closed.
func (c *Client) Close() error {
	if c.shared.Load() {
		err := c.conn.Close()
		<-c.closed
		return err
	}
	if _, cl, err := c.send("QUIT"); err == nil {
		grace, cancel := context.WithTimeout(context.Background(), quitGrace)
		if _, err := c.wait(grace, cl); err == nil {
			select {
			case <-c.closed:
			case <-grace.Done():
			}
		}
		cancel()
	}
	err := c.conn.Close()
	<-c.closed
	return err
}

// Done is closed when the connection to the agent is gone.
func (c *Client) Done() <-chan struct{} { return c.closed }

// Session returns the agent's id for this connection.
func (c *Client) Session() string { return c.session }

func (c *Client) read() {
	r := bufio.NewReader(c.conn)
	var err error
	for {
		var line string
		line, err = r.ReadString('\n')
		if err != nil {
			break
		}
		c.route(strings.TrimRight(line, "\r\n"))
	}
	c.shutdown()
}

// shutdown fails every pending call and loses every lock.
func (c *Client) shutdown() {
	c.mu.Lock()
	c.err = ErrClosed
	calls := c.calls
	c.calls = map[string]*call{}
	locks := c.locks
	c.locks = map[lockKey][]*Lock{}
	c.mu.Unlock()
	for _, ls := range locks {
		for _, l := range ls {
			l.lose("disconnected", "")
		}
	}
	close(c.closed)
	_ = calls // their callers see c.closed
}

func (c *Client) route(line string) {
	words := strings.Fields(line)
	if len(words) < 2 {
		return
	}
	if words[0] == "*" {
		c.push(words[1:])
		return
	}
	tag, kind := words[0], words[1]
	fields := map[string]string{}
	for _, w := range words[2:] {
		if k, v, ok := strings.Cut(w, "="); ok {
			fields[k] = v
		}
	}
	c.mu.Lock()
	cl := c.calls[tag]
	if cl == nil {
		c.mu.Unlock()
		return
	}
	if kind == "DATA" {
		if len(words) > 2 && !strings.Contains(words[2], "=") {
			fields[""] = words[2] // what the line is about: WHO's "DATA waiting ..."
		}
		cl.data = append(cl.data, fields)
		c.mu.Unlock()
		return
	}
	delete(c.calls, tag)
	c.mu.Unlock()
	r := reply{kind: kind, fields: fields, words: words[1:], data: cl.data}
	if cl.then != nil {
		cl.then(r)
	}
	cl.done <- r
}

// push routes a push: LOST and WANTED to the locks of the name and owner,
// LEADER to the observers of the name. BYE is left to the connection's end.
func (c *Client) push(words []string) {
	if len(words) < 2 {
		return
	}
	fields := map[string]string{}
	for _, w := range words[2:] {
		if k, v, ok := strings.Cut(w, "="); ok {
			fields[k] = v
		}
	}
	key := lockKey{words[1], fields["owner"]}
	switch words[0] {
	case "LOST":
		c.mu.Lock()
		ls := c.locks[key]
		delete(c.locks, key)
		c.mu.Unlock()
		for _, l := range ls {
			l.lose(fields["reason"], fields["why"])
		}
	case "WANTED":
		c.mu.Lock()
		ls := append([]*Lock(nil), c.locks[key]...)
		c.mu.Unlock()
		for _, l := range ls {
			l.want()
		}
	case "LEADER":
		c.leader(leaderOf(words[1], words[2:], fields))
	}
}

// send writes one request and returns its tag and where its reply will come.
func (c *Client) send(line string) (string, *call, error) { return c.sendThen(line, nil) }

// sendThen is send with a call's then.
func (c *Client) sendThen(line string, then func(reply)) (string, *call, error) {
	tag := strconv.FormatUint(c.nextTag.Add(1), 10)
	if err := checkTag(tag); err != nil {
		return "", nil, err
	}
	cl := &call{done: make(chan reply, 1), then: then}
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return "", nil, c.err
	}
	c.calls[tag] = cl
	c.mu.Unlock()
	c.wmu.Lock()
	_, err := c.conn.Write([]byte(tag + " " + line + "\n"))
	c.wmu.Unlock()
	if err != nil {
		c.mu.Lock()
		delete(c.calls, tag)
		c.mu.Unlock()
		// Part of the line may have been written: the stream is unusable.
		c.conn.Close()
		return "", nil, fmt.Errorf("%w: %v", ErrClosed, err)
	}
	return tag, cl, nil
}

// wait waits for a call's reply, the connection's end, or ctx.
func (c *Client) wait(ctx context.Context, cl *call) (reply, error) {
	select {
	case r := <-cl.done:
		return r, replyErr(r)
	case <-c.closed:
		return reply{}, ErrClosed
	case <-ctx.Done():
		return reply{}, ctx.Err()
	}
}

func replyErr(r reply) error {
	switch r.kind {
	case "OK":
		return nil
	case "BUSY":
		return ErrBusy
	case "ERR":
		return errorFromReply(r.words)
	}
	return &Error{Code: "INTERNAL", Msg: "unexpected reply " + r.kind}
}

// do sends a request and waits for its reply. If ctx ends first the request
// still completes at the agent; its reply is dropped.
func (c *Client) do(ctx context.Context, line string) (reply, error) {
	_, cl, err := c.send(line)
	if err != nil {
		return reply{}, err
	}
	return c.wait(ctx, cl)
}

// Ping checks the agent answers.
func (c *Client) Ping(ctx context.Context) error {
	_, err := c.do(ctx, "PING")
	return err
}

// Lock acquires name: 1-200 bytes of [A-Za-z0-9._:/@+-]. A name or option
// outside the protocol is an *ArgError, and nothing is sent. Lock returns
// ErrBusy when a Wait ran out, and ctx.Err() when ctx ended first: then the
// wait is cancelled at the agent and a grant that won the race is released,
// so nothing stays held.
func (c *Client) Lock(ctx context.Context, name string, opts ...Option) (*Lock, error) {
	var o lockOptions
	for _, f := range opts {
		f(&o)
	}
	if o.owner == "" {
		o.owner = "g" + strconv.FormatUint(c.owners.Add(1), 10)
	}
	line, err := lockLine(name, o)
	if err != nil {
		return nil, err
	}
	// Register the lock before sending, so a LOST push racing the reply finds it.
	l := newLock(c, name, o)
	l.ctx, l.cancel = context.WithCancelCause(context.Background())
	c.track(l)
	tag, cl, err := c.send(line)
	if err != nil {
		c.untrack(l)
		return nil, err
	}
	r, err := c.wait(ctx, cl)
	if ctx.Err() != nil && err == ctx.Err() {
		return nil, c.abandon(tag, cl, l, ctx.Err())
	}
	if err != nil {
		c.untrack(l)
		return nil, err
	}
	l.grant(r.fields)
	return l, nil
}

// LockAll takes several names at once: all are granted, or none is held.
// The agent claims them in byte order whatever order they are given, so two
// LockAll calls over overlapping names never deadlock, and Wait bounds the
// whole. It returns one Lock per name, in the order given; after the grant
// each is independent (unlock any subset; each may be lost on its own).
// All of them share one owner. With TTL, each name ends TTL after all were
// won; one lost before that makes all of them given back.
// No names, a name given twice, or names too long together for one request
// line (about 3,900 bytes) are an *ArgError, and nothing is sent.
func (c *Client) LockAll(ctx context.Context, names []string, opts ...Option) ([]*Lock, error) {
	if err := checkNames(names); err != nil {
		return nil, err
	}
	var o lockOptions
	for _, f := range opts {
		f(&o)
	}
	if o.owner == "" {
		o.owner = "g" + strconv.FormatUint(c.owners.Add(1), 10)
	}
	line, err := lockLine(names[0], o)
	if err != nil {
		return nil, err
	}
	line = "LOCK " + strings.Join(names, " ") + strings.TrimPrefix(line, "LOCK "+names[0])
	if err := checkLine(line); err != nil {
		return nil, err
	}
	ls := make([]*Lock, len(names))
	for i, n := range names {
		ls[i] = newLock(c, n, o)
		ls[i].ctx, ls[i].cancel = context.WithCancelCause(context.Background())
		c.track(ls[i])
	}
	untrack := func() {
		for _, l := range ls {
			c.untrack(l)
		}
	}
	tag, cl, err := c.send(line)
	if err != nil {
		untrack()
		return nil, err
	}
	r, err := c.wait(ctx, cl)
	if ctx.Err() != nil && err == ctx.Err() {
		cleanup, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c.do(cleanup, "CANCEL "+tag)
		if r, err := c.wait(cleanup, cl); err == nil && r.kind == "OK" {
			grantAll(ls, r.fields)
			for _, l := range ls {
				l.Unlock(cleanup)
			}
		}
		untrack()
		return nil, ctx.Err()
	}
	if err != nil {
		untrack()
		return nil, err
	}
	grantAll(ls, r.fields)
	return ls, nil
}

// grantAll spreads a multi-lock's reply (comma-separated fences, counts and
// slots, in the order of ls) over its locks.
func grantAll(ls []*Lock, f map[string]string) {
	fences, counts, slots := strings.Split(f["fence"], ","), strings.Split(f["count"], ","), strings.Split(f["slot"], ",")
	for i, l := range ls {
		g := map[string]string{"validity": f["validity"]}
		if i < len(fences) {
			g["fence"] = fences[i]
		}
		if i < len(counts) {
			g["count"] = counts[i]
		}
		if i < len(slots) {
			g["slot"] = slots[i]
		}
		l.grant(g)
	}
}

// abandon cancels a LOCK whose caller gave up, and releases it if it was
// granted before the CANCEL arrived.
func (c *Client) abandon(tag string, cl *call, l *Lock, cause error) error {
	cleanup, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.do(cleanup, "CANCEL "+tag)
	r, err := c.wait(cleanup, cl)
	if err == nil && r.kind == "OK" {
		l.grant(r.fields)
		l.Unlock(cleanup)
	}
	c.untrack(l)
	return cause
}

func (c *Client) track(l *Lock) {
	c.mu.Lock()
	k := lockKey{l.name, l.owner}
	c.locks[k] = append(c.locks[k], l)
	c.mu.Unlock()
}

func (c *Client) untrack(l *Lock) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := lockKey{l.name, l.owner}
	ls := c.locks[k]
	for i, o := range ls {
		if o == l {
			ls = append(ls[:i], ls[i+1:]...)
			break
		}
	}
	if len(ls) == 0 {
		delete(c.locks, k)
	} else {
		c.locks[k] = ls
	}
}

// Lock is one held lock.
type Lock struct {
	c           *Client
	name, owner string
	ctx         context.Context
	cancel      context.CancelCauseFunc
	done        chan struct{}
	once        sync.Once
	unlocking   atomic.Bool   // an UNLOCK was sent
	wanted      chan struct{} // one signal pending at most: the WANTED pushes coalesce

	mu       sync.Mutex
	fence    int64
	count    int64
	slot     int
	validity time.Duration
	at       time.Time // when validity was reported
	err      error
	value    string // as given to Value or Proclaim, not encoded
}

func newLock(c *Client, name string, o lockOptions) *Lock {
	return &Lock{c: c, name: name, owner: o.owner, done: make(chan struct{}), wanted: make(chan struct{}, 1), value: o.value}
}

func (l *Lock) grant(f map[string]string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fence, _ = strconv.ParseInt(f["fence"], 10, 64)
	l.count, _ = strconv.ParseInt(f["count"], 10, 64)
	l.slot, _ = strconv.Atoi(f["slot"])
	ms, _ := strconv.ParseInt(f["validity"], 10, 64)
	l.validity, l.at = time.Duration(ms)*time.Millisecond, time.Now()
}

func (l *Lock) lose(reason, why string) {
	if reason == "disconnected" && l.unlocking.Load() {
		// The UNLOCK was sent; the closed connection released the lock just as well.
		l.end(ErrUnlocked)
		return
	}
	l.end(&LostError{Name: l.name, Owner: l.owner, Fence: l.Fence(), Reason: reason, Why: why})
}

func (l *Lock) end(err error) {
	l.once.Do(func() {
		l.mu.Lock()
		l.err = err
		l.mu.Unlock()
		l.cancel(err)
		close(l.done)
	})
}

// Name returns the lock's name.
func (l *Lock) Name() string { return l.name }

// Slot is a semaphore hold's slot, 1 to its limit; 0 for a lock. Fence a
// semaphore's resource per slot.
func (l *Lock) Slot() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.slot
}

// Owner returns the owner the lock is held by.
func (l *Lock) Owner() string { return l.owner }

// Fence returns the fencing token: strictly greater than every earlier
// grant's of this name, by any agent. Pass it to what the lock protects.
func (l *Lock) Fence() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fence
}

// Count returns the re-entry count at grant time (1 unless Owner re-entered).
func (l *Lock) Count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int(l.count)
}

// Validity returns how long the lock is still known valid, as of the last
// grant or Extend (the agent keeps renewing watchdog locks beyond it).
func (l *Lock) Validity() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return max(l.validity-time.Since(l.at), 0)
}

// Done is closed when the lock ends: Unlock, LOST, or the connection dropped.
func (l *Lock) Done() <-chan struct{} { return l.done }

// Context is cancelled when the lock ends; context.Cause says why.
func (l *Lock) Context() context.Context { return l.ctx }

// Err returns nil while the lock is held; after it ended, why: a *LostError
// (matching ErrLost) if it was lost, ErrUnlocked after Unlock.
func (l *Lock) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// unlockGrace is how long Unlock still waits for the agent's answer once its
// ctx has ended: the UNLOCK is already on the wire, and the agent answers it
// within a few master timeouts.
var unlockGrace = 5 * time.Second // a var for tests

// Unlock releases the lock (this re-entry of it, when Owner re-entered).
// Afterwards Done is closed and Err is ErrUnlocked.
//
// The release does not depend on ctx: Unlock sends the UNLOCK even when ctx
// is already done (as it is in a deferred Unlock of a job that was
// cancelled), and waits for the agent's answer up to unlockGrace (5s) past
// the end of ctx. It returns nil when the agent released the lock, or when
// the connection closed meanwhile (the agent releases every lock of a closed
// connection). It returns the *LostError if the lock had been lost before,
// ErrNotHeld if it was already unlocked, and an error saying so if the agent
// did not answer in time (wrapping ctx.Err()): the lock may then still be
// held until the agent answers or the connection closes, and Done closes then.
func (l *Lock) Unlock(ctx context.Context) error {
	if err := l.Err(); err != nil {
		if errors.Is(err, ErrUnlocked) {
			return fmt.Errorf("%w: %s was already unlocked", ErrNotHeld, l.name)
		}
		return err
	}
	l.unlocking.Store(true)
	_, cl, err := l.c.send("UNLOCK " + l.name + " owner=" + l.owner)
	if err != nil {
		// The connection is gone: the agent released the lock with it.
		<-l.done
		return l.unlockResult()
	}
	r, err := l.c.wait(ctx, cl)
	if err != nil && err == ctx.Err() {
		grace, cancel := context.WithTimeout(context.Background(), unlockGrace)
		r, err = l.c.wait(grace, cl)
		cancel()
		if err == grace.Err() {
			go func() { l.unlocked(l.c.wait(context.Background(), cl)) }()
			return fmt.Errorf("lockagent: unlock %s: sent, but the agent did not answer within %v of %w; "+
				"it may still hold the lock until it answers (Done closes then) or the connection closes",
				l.name, unlockGrace, ctx.Err())
		}
	}
	if err := l.unlocked(r, err); err != nil {
		return err
	}
	return l.unlockResult()
}

// unlocked ends the lock according to the answer to its UNLOCK, and returns
// the answer's error if the lock may still be held.
func (l *Lock) unlocked(_ reply, err error) error {
	switch {
	case err == nil:
		l.c.untrack(l)
		l.end(ErrUnlocked)
	case errors.Is(err, ErrNotHeld):
		// Lost before the UNLOCK arrived; its LOST push, which came first,
		// has ended the lock with the reason, unless the agent sent none.
		l.c.untrack(l)
		l.end(err)
	case errors.Is(err, ErrClosed):
		<-l.done // ended by the connection's shutdown, as ErrUnlocked
	default:
		return err
	}
	return nil
}

// unlockResult is what Unlock returns once the lock has ended: nil if Unlock
// ended it, else why it ended.
func (l *Lock) unlockResult() error {
	if err := l.Err(); !errors.Is(err, ErrUnlocked) {
		return err
	}
	return nil
}

// Extend sets the lock's end to d from now, earlier or later (1ms to one
// year, rounded up to whole milliseconds; else an *ArgError; the agent
// allows up to its lock.max_ttl), and returns its new validity: a lock
// without TTL gets an end this way. The agent answers at once, asking no
// master.
func (l *Lock) Extend(ctx context.Context, d time.Duration) (time.Duration, error) {
	if err := l.Err(); err != nil {
		return 0, err
	}
	if err := checkDuration("ttl", d, time.Millisecond); err != nil {
		return 0, err
	}
	r, err := l.c.do(ctx, "EXTEND "+l.name+" ttl="+durationArg(d)+" owner="+l.owner)
	if err != nil {
		return 0, err
	}
	ms, _ := strconv.ParseInt(r.fields["validity"], 10, 64)
	l.mu.Lock()
	l.validity, l.at = time.Duration(ms)*time.Millisecond, time.Now()
	l.mu.Unlock()
	return time.Duration(ms) * time.Millisecond, nil
}
