package agent

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lock-agent/lock-agent/protocol"
	"github.com/lock-agent/lock-agent/quorum"
	"github.com/lock-agent/lock-agent/renewal"
)

// hold is one name held by one session+owner. count and the session's map
// are guarded by the session's mu.
type hold struct {
	rh    *renewal.Hold // name, holder id, and whether it is a ttl= hold
	sess  *session
	owner string
	fence int64
	count int
	mode  protocol.Mode
}

func (h *hold) key() holdKey { return holdKey{h.rh.Name, h.owner} }

// waiterState is where a waiter is; it changes only under its queue's mu.
type waiterState int

const (
	queued    waiterState = iota
	granted               // the contender won it: the result is in done
	failed                // the contender gave up on it: the result is in done
	withdrawn             // its LOCK went away (timeout, CANCEL, session closed)
)

// waiter is one LOCK waiting in its name's queue.
type waiter struct {
	sess   *session
	tag    string
	req    protocol.Lock
	q      *queue
	info   string // who-info recorded with the hold, less its since=
	state  waiterState
	done   chan result // receives exactly once, when state becomes granted or failed
	cancel chan struct{}
	once   sync.Once
}

type result struct {
	h        *hold
	validity time.Duration
	err      error // quorum.ErrBusy for BUSY
}

// queue is this agent's waiters for one name in arrival order. One contender
// goroutine works for its head against the masters, so an agent with many
// local waiters sends one attempt, and holds one subscription, per name.
type queue struct {
	name    string
	mu      sync.Mutex
	waiters []*waiter
	changed chan struct{}
	count   *atomic.Int64 // the agent's count of waiters in all queues
}

func (q *queue) poke() {
	select {
	case q.changed <- struct{}{}:
	default:
	}
}

// remove takes w out of the queue if it is still queued, giving it state st.
func (q *queue) remove(w *waiter, st waiterState) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if w.state != queued {
		return false
	}
	w.state = st
	for i, o := range q.waiters {
		if o == w {
			q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
			break
		}
	}
	q.count.Add(-1)
	return true
}

func unsupported(l protocol.Lock) error {
	switch {
	case len(l.Names) > 1:
		return protocol.Errorf(protocol.ErrBadRequest, "multi-name LOCK not supported yet")
	case l.Mode == protocol.Shared:
		return protocol.Errorf(protocol.ErrBadRequest, "mode=shared not supported yet")
	case l.Limit > 0:
		return protocol.Errorf(protocol.ErrBadRequest, "limit= not supported yet")
	case l.Fair:
		return protocol.Errorf(protocol.ErrBadRequest, "fair=true not supported yet")
	}
	return nil
}

func (s *session) lock(req *protocol.Request) error {
	l, err := protocol.ParseLock(req)
	if err != nil {
		return err
	}
	if err := unsupported(l); err != nil {
		return err
	}
	a := s.a
	name := l.Names[0]
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return protocol.Errorf(protocol.ErrShuttingDown, "session is closing")
	}
	if h := s.holds[holdKey{name, l.Owner}]; h != nil {
		if v, ok := a.watchdog.Validity(h.rh); ok && v > 0 {
			h.count++
			line := grantLine(req.Tag, h, v)
			s.mu.Unlock()
			s.send(line)
			return nil
		}
	}
	if len(s.holds)+len(s.waits) >= a.cfg.Limits.MaxHoldsPerSession {
		s.mu.Unlock()
		return protocol.Errorf(protocol.ErrLimit, "session holds or waits for %d names (max_holds_per_session)", a.cfg.Limits.MaxHoldsPerSession)
	}
	if _, dup := s.waits[req.Tag]; dup {
		s.mu.Unlock()
		return protocol.Errorf(protocol.ErrBadRequest, "tag %s already names a waiting LOCK", req.Tag)
	}
	w := &waiter{sess: s, tag: req.Tag, req: l, done: make(chan result, 1), cancel: make(chan struct{})}
	w.info = fmt.Sprintf("agent=%s pid=%d uid=%d owner=%s mode=%s", a.cfg.AgentID, s.cred.PID, s.cred.UID, l.Owner, l.Mode)
	s.waits[req.Tag] = w
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.waits, req.Tag)
		s.mu.Unlock()
	}()
	if err := a.enqueue(w); err != nil {
		return err
	}
	r := s.await(w)
	switch {
	case r.err == nil:
		s.send(grantLine(req.Tag, r.h, r.validity))
	case errors.Is(r.err, quorum.ErrBusy):
		s.send(protocol.Reply(req.Tag, protocol.KindBusy).Bytes())
	default:
		return r.err
	}
	return nil
}

// errSessionGone ends the waits of a closing session. The client may have
// only shut its writing side, so it is still told.
var errSessionGone = protocol.Errorf(protocol.ErrCancelled, "session closed")

// await waits for w's result, or withdraws it when its wait runs out, it is
// cancelled, or the session closes. A result that won the race is kept.
func (s *session) await(w *waiter) result {
	var timeout <-chan time.Time
	if w.req.Wait > 0 {
		t := time.NewTimer(w.req.Wait)
		defer t.Stop()
		timeout = t.C
	}
	var why result
	select {
	case r := <-w.done:
		return r
	case <-timeout:
		why = result{err: quorum.ErrBusy}
	case <-w.cancel:
		why = result{err: protocol.Errorf(protocol.ErrCancelled, "cancelled by CANCEL")}
	case <-s.ctx.Done():
		why = result{err: errSessionGone}
	}
	if s.a.withdraw(w) {
		return why
	}
	return <-w.done
}

func grantLine(tag string, h *hold, validity time.Duration) []byte {
	return protocol.Reply(tag, protocol.KindOK).Int("fence", h.fence).Int("validity", validity.Milliseconds()).Int("count", int64(h.count)).Bytes()
}

func lostLine(h *hold, reason string) []byte {
	return protocol.Push("LOST").Word(h.rh.Name).Str("owner", h.owner).Int("fence", h.fence).Str("reason", reason).Bytes()
}

// enqueue puts w at the back of its name's queue, starting the name's
// contender if it has none. A wait=0 LOCK behind other local waiters is BUSY
// at once: the name is contended and it may not wait.
func (a *Agent) enqueue(w *waiter) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopping {
		return protocol.Errorf(protocol.ErrShuttingDown, "agent is stopping")
	}
	if a.waiters.Load() >= int64(a.cfg.Limits.MaxWaiters) {
		return protocol.Errorf(protocol.ErrLimit, "agent has %d waiting LOCKs (max_waiters)", a.cfg.Limits.MaxWaiters)
	}
	name := w.req.Names[0]
	q := a.queues[name]
	start := q == nil
	if start {
		q = &queue{name: name, changed: make(chan struct{}, 1), count: &a.waiters}
		a.queues[name] = q
	}
	q.mu.Lock()
	if w.req.Wait == 0 && len(q.waiters) > 0 {
		q.mu.Unlock()
		w.state = failed
		w.done <- result{err: quorum.ErrBusy}
		return nil
	}
	w.q = q
	q.waiters = append(q.waiters, w)
	a.waiters.Add(1)
	q.mu.Unlock()
	if start {
		go a.contend(q)
	}
	return nil
}

func (a *Agent) withdraw(w *waiter) bool {
	if w.q == nil || !w.q.remove(w, withdrawn) {
		return false
	}
	w.q.poke()
	return true
}

// head returns the first waiter, or nil after retiring an empty queue.
func (a *Agent) head(q *queue) *waiter {
	a.mu.Lock()
	defer a.mu.Unlock()
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.waiters) == 0 {
		delete(a.queues, q.name)
		return nil
	}
	return q.waiters[0]
}

// contend works for the queue's head until the queue is empty: it tries the
// masters, and while the name is held elsewhere it sleeps until a release
// message, its timer fallback (the holder's remaining lease: PUBLISH does
// not fire on expiry), or a change in the queue.
func (a *Agent) contend(q *queue) {
	var watch *quorum.Watch
	defer func() {
		if watch != nil {
			watch.Close()
		}
	}()
	ctx := a.runCtx
	for {
		w := a.head(q)
		if w == nil {
			return
		}
		if w.sess.reenterQueued(w) {
			continue
		}
		lease := a.cfg.Lock.Lease
		if w.req.TTL > 0 {
			lease = w.req.TTL
		}
		holder := a.holderID(w.sess.id, w.req.Owner)
		info := w.info + " since=" + strconv.FormatInt(time.Now().UnixMilli(), 10) // when this attempt (if it wins) began holding
		g, err := a.cluster.Acquire(ctx, quorum.AcquireRequest{Name: q.name, Holder: holder, Lease: lease, Info: info})
		if err == nil {
			a.grant(q, w, holder, g)
			continue
		}
		var round *quorum.RoundError
		errors.As(err, &round)
		if !errors.Is(err, quorum.ErrBusy) {
			a.finish(q, w, result{err: protocol.Errorf(protocol.ErrNoQuorum, "%v", err)})
			continue
		}
		if w.req.Wait == 0 {
			a.finish(q, w, result{err: quorum.ErrBusy})
			continue
		}
		if watch == nil {
			// Subscribe, then try again at once: a release between the
			// first attempt and the subscription would otherwise be missed.
			watch = a.cluster.Watch(ctx, q.name)
			continue
		}
		delay := time.Duration(round.RetryAfter) * time.Millisecond
		if round.Yes > 0 || delay <= 0 {
			// A split vote, or a holder with no lease: back off with jitter
			// so that contending agents do not split again in lock step.
			delay = a.cfg.Lock.RetryMin + rand.N(a.cfg.Lock.RetryMax-a.cfg.Lock.RetryMin+1)
		}
		t := a.clock.NewTimer(min(delay, a.cfg.Lock.Lease))
		select {
		case <-watch.C():
		case <-t.C():
		case <-q.changed:
		case <-ctx.Done():
		}
		t.Stop()
	}
}

// grant hands a won name to w, or gives it back if w went away meanwhile.
func (a *Agent) grant(q *queue, w *waiter, holder string, g quorum.Grant) {
	if !q.remove(w, granted) {
		a.releaseAsync(q.name, holder)
		return
	}
	h, err := w.sess.install(w, holder, g)
	if err != nil {
		a.releaseAsync(q.name, holder)
		w.done <- result{err: err}
		return
	}
	w.done <- result{h: h, validity: g.Deadline.Sub(a.clock.Now())}
}

// reenterQueued grants w as a re-entry when its session+owner came to hold
// the name while w waited (two pipelined LOCKs of one owner).
func (s *session) reenterQueued(w *waiter) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.holds[holdKey{w.req.Names[0], w.req.Owner}]
	if h == nil {
		return false
	}
	v, ok := s.a.watchdog.Validity(h.rh)
	if !ok || v <= 0 || !w.q.remove(w, granted) {
		return false
	}
	h.count++
	w.done <- result{h: h, validity: v}
	return true
}

func (a *Agent) finish(q *queue, w *waiter, r result) {
	if !q.remove(w, failed) {
		return
	}
	w.done <- r
}

// install records a granted hold in the session and the watchdog.
func (s *session) install(w *waiter, holder string, g quorum.Grant) (*hold, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return nil, errSessionGone
	}
	key := holdKey{w.req.Names[0], w.req.Owner}
	if old := s.holds[key]; old != nil {
		// Lost while w's attempt was in flight and not yet forgotten: the
		// new grant replaces it.
		s.a.forget(old)
	}
	lease := s.a.cfg.Lock.Lease
	if w.req.TTL > 0 {
		lease = w.req.TTL
	}
	h := &hold{rh: &renewal.Hold{Name: key.name, Holder: holder, Fixed: w.req.TTL > 0, Lease: lease, Record: g.Record, Fence: g.Fence}, sess: s, owner: key.owner,
		fence: g.Fence, count: 1, mode: w.req.Mode}
	s.holds[key] = h
	s.a.mu.Lock()
	s.a.holds[h.rh] = h
	s.a.mu.Unlock()
	s.a.watchdog.Add(h.rh, g.Deadline)
	return h, nil
}

// onLost is the watchdog's report of a hold that ended on its own.
func (a *Agent) onLost(rh *renewal.Hold, reason renewal.Reason) {
	a.mu.Lock()
	h := a.holds[rh]
	delete(a.holds, rh)
	a.mu.Unlock()
	if h == nil {
		return
	}
	s := h.sess
	s.mu.Lock()
	mine := s.holds[h.key()] == h
	if mine {
		delete(s.holds, h.key())
	}
	s.mu.Unlock()
	if mine {
		s.push(lostLine(h, string(reason)))
		s.log.Warn("hold lost", "name", rh.Name, "owner", h.owner, "fence", h.fence, "reason", reason)
		a.releaseAsync(rh.Name, rh.Holder)
	}
}

// forget drops a hold from the agent's books before it is released.
func (a *Agent) forget(h *hold) {
	a.mu.Lock()
	delete(a.holds, h.rh)
	a.mu.Unlock()
	a.watchdog.Remove(h.rh)
}

// release drops a hold in the masters and lets local waiters try at once.
func (a *Agent) release(ctx context.Context, name, holder string) {
	if _, err := a.cluster.Release(ctx, name, holder); err != nil {
		a.log.Warn("release reached no master; the lease will expire", "name", name, "error", err)
	}
	a.mu.Lock()
	q := a.queues[name]
	a.mu.Unlock()
	if q != nil {
		q.poke()
	}
}

func (a *Agent) releaseAsync(name, holder string) {
	go a.release(context.Background(), name, holder)
}

// releaseAll releases holds in parallel and returns when all are done.
func (a *Agent) releaseAll(holds map[holdKey]*hold) {
	var wg sync.WaitGroup
	for _, h := range holds {
		a.forget(h)
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.release(context.Background(), h.rh.Name, h.rh.Holder)
		}()
	}
	wg.Wait()
}

func (s *session) unlock(req *protocol.Request) error {
	u, err := protocol.ParseUnlock(req)
	if err != nil {
		return err
	}
	if len(u.Names) > 1 {
		return protocol.Errorf(protocol.ErrBadRequest, "multi-name UNLOCK not supported yet")
	}
	key := holdKey{u.Names[0], u.Owner}
	s.mu.Lock()
	h := s.holds[key]
	if h == nil {
		s.mu.Unlock()
		return protocol.Errorf(protocol.ErrNotHeld, "%s is not held by this session and owner %q", key.name, key.owner)
	}
	h.count--
	count := h.count
	if count == 0 {
		delete(s.holds, key)
	}
	s.mu.Unlock()
	if count == 0 {
		s.a.forget(h)
		s.a.release(s.ctx, h.rh.Name, h.rh.Holder)
	}
	s.send(protocol.Reply(req.Tag, protocol.KindOK).Int("count", int64(count)).Bytes())
	return nil
}

func (s *session) extend(req *protocol.Request) error {
	e, err := protocol.ParseExtend(req)
	if err != nil {
		return err
	}
	s.mu.Lock()
	h := s.holds[holdKey{e.Name, e.Owner}]
	s.mu.Unlock()
	if h == nil {
		return protocol.Errorf(protocol.ErrNotHeld, "%s is not held by this session and owner %q", e.Name, e.Owner)
	}
	deadline, err := s.a.cluster.Extend(s.ctx, h.rh.Name, h.rh.Holder, e.TTL)
	switch {
	case errors.Is(err, quorum.ErrNotHeld):
		return protocol.Errorf(protocol.ErrNotHeld, "%s is no longer held in the masters", e.Name)
	case err != nil:
		return protocol.Errorf(protocol.ErrNoQuorum, "%v", err)
	}
	if !s.a.watchdog.Extend(h.rh, e.TTL, deadline) {
		return protocol.Errorf(protocol.ErrNotHeld, "%s was lost", e.Name)
	}
	s.send(protocol.Reply(req.Tag, protocol.KindOK).Int("validity", deadline.Sub(s.a.clock.Now()).Milliseconds()).Bytes())
	return nil
}

func (s *session) cancelWait(req *protocol.Request) error {
	tag, err := protocol.ParseCancel(req)
	if err != nil {
		return err
	}
	s.mu.Lock()
	w := s.waits[tag]
	s.mu.Unlock()
	if w != nil {
		w.once.Do(func() { close(w.cancel) })
	}
	s.send(protocol.Reply(req.Tag, protocol.KindOK).Bytes())
	return nil
}

func (s *session) listHolds(req *protocol.Request) error {
	if err := req.NoArgs(); err != nil {
		return err
	}
	s.mu.Lock()
	var lines [][]byte
	for _, h := range s.holds {
		v, _ := s.a.watchdog.Validity(h.rh)
		lines = append(lines, protocol.Reply(req.Tag, protocol.KindData).Str("name", h.rh.Name).Str("owner", h.owner).
			Int("fence", h.fence).Int("count", int64(h.count)).Str("mode", string(h.mode)).Int("validity", v.Milliseconds()).Bytes())
	}
	s.mu.Unlock()
	for _, l := range lines {
		s.send(l)
	}
	s.send(protocol.Reply(req.Tag, protocol.KindOK).Int("n", int64(len(lines))).Bytes())
	return nil
}

// whoFields is the order of a WHO DATA line.
var whoFields = []string{"agent", "pid", "uid", "owner", "mode", "fence", "since"}

func (s *session) who(req *protocol.Request) error {
	name, err := protocol.ParseWho(req)
	if err != nil {
		return err
	}
	holders, err := s.a.cluster.Who(s.ctx, name)
	if err != nil {
		return protocol.Errorf(protocol.ErrNoQuorum, "%v", err)
	}
	for _, h := range holders {
		fields := map[string]string{"fence": strconv.FormatInt(h.Fence, 10)}
		for _, kv := range strings.Fields(h.Info) {
			if k, v, ok := strings.Cut(kv, "="); ok {
				fields[k] = v
			}
		}
		l := protocol.Reply(req.Tag, protocol.KindData)
		for _, k := range whoFields {
			l.Str(k, fields[k])
		}
		s.send(l.Bytes())
	}
	s.send(protocol.Reply(req.Tag, protocol.KindOK).Int("n", int64(len(holders))).Bytes())
	return nil
}
