// Package quorum runs the RedLock algorithm over N independent Redis masters:
// Lua scripts that acquire, renew, release and read a name on one master; a
// parallel fan-out with a per-master deadline; the validity math; fencing
// tokens that grow across agents; and the release channels that wake waiters.
package quorum

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/redis/rueidis"
)

// Config configures a Cluster. Zero durations take the defaults noted.
type Config struct {
	Masters []MasterConfig
	// KeyPrefix starts every key, e.g. "lock-agent:".
	KeyPrefix string
	// DriftFactor is the clock drift allowance as a fraction of a lease.
	DriftFactor float64
	// MasterTimeout bounds one operation on one master; default 50ms.
	MasterTimeout time.Duration
	// ProbeInterval is how often each master's health is probed; default 200ms.
	ProbeInterval time.Duration
	// SafetyInterval is how often each master's configuration is checked
	// for what makes it unsafe (see UnsafeError); default 5s.
	SafetyInterval time.Duration
	// Quarantine is how long a master that lost its data does not vote,
	// counted on its own clock from when an agent first meets it empty: at
	// least the longest lease (watchdog lease or ttl=) any agent grants,
	// plus drift. Default 15s.
	Quarantine time.Duration
	// Tombstone is how long the tombstone of a release that overtook its
	// acquire lasts: longer than a command can sit in a connection. Default 15s.
	Tombstone time.Duration
	// MaxRounds bounds the rounds (acquire, extend, who) in flight at once;
	// more wait their turn, and a round's deadlines start only when it is
	// sent, so a burst is queued instead of timing out. Default 64.
	MaxRounds int
	// AdmitTimeout bounds how long a round waits for its turn before it
	// fails with ErrOverloaded. Waiting costs a round nothing (its validity
	// counts from when it is sent). Default 1m.
	AdmitTimeout time.Duration
	// InstanceID names this agent instance in the masters' data markers.
	InstanceID string
	Clock      Clock        // default RealClock
	Logger     hclog.Logger // default a null logger
	// Observer hears of each master's latency, quarantines and fence
	// write-backs, for metrics; default NopObserver.
	Observer Observer
}

// Cluster is the set of masters and the quorum operations over them. Its
// methods are safe for concurrent use; Run must be running for masters to
// connect.
type Cluster struct {
	cfg     Config
	clock   Clock
	masters []*master
	quorum  int
	isDone  atomic.Bool
	rounds  chan struct{} // one token per round in flight: see MaxRounds
	// giveBack is the release message of this agent's failed rounds, which
	// its own waiters ignore.
	giveBack string
	epochs   atomic.Uint64 // numbers the epochs this agent may plant

	// wanted is the message by which this agent tells a name's holder that
	// it waits for the name (see Wanted); handover its release message
	// after such a wait (see HandOver).
	wanted, handover string

	watchMu sync.Mutex
	watches map[string]map[*Watch]struct{} // by channel

	bgMu       sync.Mutex
	bgClosed   bool           // set once Run is stopping: no new background work
	background sync.WaitGroup // releases still in flight; Run waits for them
}

// goBackground runs f in a goroutine that Run waits for before it closes the
// connections. Once Run is stopping it runs f inline instead: f is bounded by
// its own deadline, and a WaitGroup may not grow while it is waited on.
func (c *Cluster) goBackground(f func()) {
	c.bgMu.Lock()
	if c.bgClosed {
		c.bgMu.Unlock()
		f()
		return
	}
	c.background.Add(1)
	c.bgMu.Unlock()
	go func() {
		defer c.background.Done()
		f()
	}()
}

// AcquireRequest asks for one name for one holder.
type AcquireRequest struct {
	Name string
	// Holder identifies this attempt across all agents. It must be new for
	// every attempt: once released, a holder id is refused for Quarantine.
	Holder string
	Lease  time.Duration // the lease set on each master
	Claim  Claim
	Who    Who // recorded with the hold
	// Entry is the claim's place in the name's queue (see Enqueue), if it
	// has one: it may then pass the entries behind it. Without one it may
	// pass no conflicting entry.
	Entry *Entry
	// FenceBlock is how many fences the grant reserves (see acquireSrc):
	// the grant's fence and the FenceBlock-1 after it, which the caller may
	// hand to later holders of the same hold. 0 or 1: one.
	FenceBlock int
}

// block is how many fences req's grant reserves.
func (req AcquireRequest) block() int64 { return int64(max(req.FenceBlock, 1)) }

// Grant is a won acquire.
type Grant struct {
	Fence int64
	Slot  int // a semaphore's slot; 0 for a lock
	// Record is what the masters hold for this grant: the watchdog
	// re-creates it on a master that lacks it (see Renew).
	Record Record
	// Deadline is when the hold stops being known valid unless renewed:
	// the round's start + lease − drift.
	Deadline time.Time
}

// MasterStatus is one master's health.
type MasterStatus struct {
	Name, Address string
	State         State
	Err           string // the last error, if any, in the agent's words
	// QuarantineLeft is, while quarantined, how long until it may vote.
	QuarantineLeft time.Duration
}

// Holder is one current holder of a name as recorded in the masters, with
// the highest fence any of them recorded.
type Holder struct {
	ID     string
	Record Record
}

// RenewKey names one hold to renew, with what to re-create where it is missing.
type RenewKey struct {
	Name, Holder string
	// Entry marks a queue entry's heartbeat: Holder is then the entry's
	// Member, and Record is zero.
	Entry  bool
	Record Record        // the Grant's; a zero Record is never re-created
	Lease  time.Duration // the lease to set; 0: Renew's lease
}

// RenewResult counts the voting masters that renewed a hold (OK), that
// answered it is no longer there (Gone), and, of those, where a renewal
// that kept a majority re-created it (Repaired).
type RenewResult struct {
	OK, Gone, Repaired int
}

// New returns a Cluster for cfg. It does not connect; Run does.
func New(cfg Config) (*Cluster, error) {
	if len(cfg.Masters) == 0 {
		return nil, errors.New("quorum: no masters")
	}
	if cfg.MasterTimeout <= 0 {
		cfg.MasterTimeout = 50 * time.Millisecond
	}
	if cfg.ProbeInterval <= 0 {
		cfg.ProbeInterval = 200 * time.Millisecond
	}
	if cfg.SafetyInterval <= 0 {
		cfg.SafetyInterval = 5 * time.Second
	}
	if cfg.Quarantine <= 0 {
		cfg.Quarantine = 15 * time.Second
	}
	if cfg.Tombstone <= 0 {
		cfg.Tombstone = 15 * time.Second
	}
	if cfg.MaxRounds <= 0 {
		cfg.MaxRounds = 64
	}
	if cfg.AdmitTimeout <= 0 {
		cfg.AdmitTimeout = time.Minute
	}
	if cfg.InstanceID == "" {
		cfg.InstanceID = randomID()
	}
	if cfg.Clock == nil {
		cfg.Clock = RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Observer == nil {
		cfg.Observer = NopObserver{}
	}
	c := &Cluster{cfg: cfg, clock: cfg.Clock, quorum: Majority(len(cfg.Masters)), watches: map[string]map[*Watch]struct{}{},
		rounds: make(chan struct{}, cfg.MaxRounds), giveBack: "give-back " + cfg.InstanceID,
		wanted: wantedPrefix + cfg.InstanceID, handover: handoverPrefix + cfg.InstanceID}
	for i, mc := range cfg.Masters {
		m := &master{cfg: mc, index: i, cluster: c, state: StateDown, lastErr: ErrNotConnected, connected: make(chan struct{}),
			log: cfg.Logger.Named("master").With("master", mc.Name)}
		m.acquires = batcher{m: m, many: acquireManyScript}
		m.releases = batcher{m: m, many: releaseManyScript, land: true}
		c.masters = append(c.masters, m)
	}
	return c, nil
}

// Run connects to the masters and keeps them probed and subscribed until ctx
// ends, then closes every connection. Calling it twice is an error.
func (c *Cluster) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, m := range c.masters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.run(ctx)
		}()
	}
	<-ctx.Done()
	c.isDone.Store(true)
	wg.Wait()
	c.bgMu.Lock()
	c.bgClosed = true
	c.bgMu.Unlock()
	// Releases still in flight get a moment to land; past it, their leases
	// expire in the masters. A stopping agent must not hang on a master that
	// does not answer.
	waitFor(stopGrace, c.background.Wait)
	waitFor(closeGrace, func() { c.eachMaster(context.Background(), func(_ context.Context, m *master) { m.close() }) })
	return nil
}

// stopGrace bounds how long a stopping cluster waits for the answers of
// releases in flight (they are written already), and closeGrace how long it
// waits for its connections to close.
const (
	stopGrace  = time.Second
	closeGrace = 500 * time.Millisecond
)

// waitFor runs f and waits for it at most d.
func waitFor(d time.Duration, f func()) {
	done := make(chan struct{})
	go func() {
		f()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

func (c *Cluster) closed() bool { return c.isDone.Load() }

// Quorum returns how many masters must agree.
func (c *Cluster) Quorum() int { return c.quorum }

// Size returns the number of masters.
func (c *Cluster) Size() int { return len(c.masters) }

// Status returns every master's health, in configuration order.
func (c *Cluster) Status() []MasterStatus {
	out := make([]MasterStatus, len(c.masters))
	for i, m := range c.masters {
		out[i] = m.status()
	}
	return out
}

func (c *Cluster) setKey(name string) string       { return c.cfg.KeyPrefix + "{" + name + "}" }
func (c *Cluster) holderPrefix(name string) string { return c.setKey(name) + ":h:" }
func (c *Cluster) channel(name string) string      { return c.setKey(name) + ":released" }
func (c *Cluster) markerKey() string               { return c.cfg.KeyPrefix + "epoch" }
func (c *Cluster) fenceKey(name string) string     { return c.setKey(name) + ":fence" }

// gateArgs are the gate's arguments (see gateLua): an epoch to plant on a
// master that has none, and the quarantine to give it.
func (c *Cluster) gateArgs() []string {
	return []string{c.cfg.InstanceID + ":" + strconv.FormatUint(c.epochs.Add(1), 10), strconv.FormatInt(c.cfg.Quarantine.Milliseconds(), 10)}
}

// admit waits for a round's turn, at most budget, and returns its release.
func (c *Cluster) admit(ctx context.Context, budget time.Duration) (func(), error) {
	select {
	case c.rounds <- struct{}{}:
		return func() { <-c.rounds }, nil
	default:
	}
	t := time.NewTimer(budget)
	defer t.Stop()
	select {
	case c.rounds <- struct{}{}:
		return func() { <-c.rounds }, nil
	case <-t.C:
		return nil, &RoundError{Kind: ErrNoQuorum, Needed: c.quorum, Masters: []error{ErrOverloaded}}
	case <-ctx.Done():
		return nil, &RoundError{Kind: ErrNoQuorum, Needed: c.quorum, Masters: []error{ctx.Err()}}
	}
}
func (c *Cluster) holderKey(name, holder string) string { return c.holderPrefix(name) + holder }

// answer is one master's reply in a round.
type answer struct {
	i   int
	res rueidis.RedisResult
}

// voters returns the masters that may vote now, and why each other one cannot.
func (c *Cluster) voters() (to []int, skipped []error) {
	for i, m := range c.masters {
		if err := m.voteErr(); err != nil {
			skipped = append(skipped, err)
		} else {
			to = append(to, i)
		}
	}
	return to, skipped
}

// fanout sends one script (of op) to the masters to, and returns where
// their answers come and the round's deadline (see roundTimeout).
func (c *Cluster) fanout(ctx context.Context, op Op, s *script, keys, args []string, to []int) (<-chan answer, context.CancelFunc, time.Duration) {
	timeout := c.roundTimeout(to)
	opCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	answers := make(chan answer, len(to))
	for _, i := range to {
		m := c.masters[i]
		start := time.Now()
		answered := func(r rueidis.RedisResult) {
			if r.Error() == nil || !errors.Is(r.Error(), context.DeadlineExceeded) {
				m.observe(time.Since(start))
			} else {
				m.observe(timeout)
			}
			answers <- answer{i, r}
		}
		go c.call(opCtx, i, op, s, start.Add(timeout), keys, args, answered)
	}
	return answers, cancel, timeout
}

// call runs s on master i and hands answered its reply. The hot scripts'
// calls may wait for a batch instead (see batch.go), so it must be called
// in a goroutine of its own that may end before the reply: answered is
// then called by the goroutine that sends the batch.
func (c *Cluster) call(ctx context.Context, i int, op Op, s *script, deadline time.Time, keys, args []string, answered func(rueidis.RedisResult)) {
	b := c.masters[i].batcherFor(s)
	start := time.Now()
	if b != nil && b.wait(&batchItem{keys: keys, args: args, deadline: deadline, timeout: deadline.Sub(start), done: func(r rueidis.RedisResult) {
		c.cfg.Observer.MasterOp(i, op, time.Since(start))
		answered(r)
	}}) {
		return
	}
	answered(c.timedEval(ctx, op, i, s, keys, args))
	if b != nil {
		b.done()
	}
}

// roundTimeout is a round's deadline: MasterTimeout, or longer while the
// masters' recent answers have been slow (a busy host: the agent's own CPU
// counts in what it measures), up to 10×MasterTimeout. A slow round is
// safe (validity counts from its start); cutting it short on a busy host
// turned healthy masters' answers into NO_QUORUM.
func (c *Cluster) roundTimeout(to []int) time.Duration {
	d := c.cfg.MasterTimeout
	for _, i := range to {
		d = max(d, min(4*c.masters[i].latency(), 10*c.cfg.MasterTimeout))
	}
	return d
}

// timedEval is master i's eval, timed for the Observer. Latency is not
// lease logic: it reads the monotonic clock, not the Cluster's Clock.
func (c *Cluster) timedEval(ctx context.Context, op Op, i int, s *script, keys, args []string) rueidis.RedisResult {
	start := time.Now()
	r := c.masters[i].eval(ctx, s, keys, args)
	c.cfg.Observer.MasterOp(i, op, time.Since(start))
	return r
}

// next returns the next answer, or false once the round's deadline passed.
// Rounds keep their own deadline rather than trust the client library to
// honour the context: a call can block on a reconnect's dial.
func next(answers <-chan answer, deadline *time.Timer) (answer, bool) {
	select {
	case a := <-answers:
		return a, true
	case <-deadline.C:
		// A collector scheduled late (a loaded host) finds the deadline and
		// answers ready at once: answers that came in time count.
		select {
		case a := <-answers:
			deadline.Reset(0)
			return a, true
		default:
			return answer{}, false
		}
	}
}

// collect reads a round's answers until its outcome is certain or
// MasterTimeout passed. judge says which slot an answer granted (0 for a
// lock), or that it refused, or the error of a master that failed. It
// returns the grants per slot, the masters that failed (the skipped ones,
// passed in as errs, included), every failure's error, and how many answers
// were left unread (for drain).
func (c *Cluster) collect(answers <-chan answer, sent int, timeout time.Duration, errs []error, judge func(answer) (slot int, agreed bool, err error)) (granted map[int]int, failed int, _ []error, unread int) {
	n := len(c.masters)
	granted = map[int]int{}
	failed = len(errs)
	refused := 0
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	got := 0
	for ; got < sent; got++ {
		if o, _ := DecideSlots(n, granted, failed+refused); o != Pending {
			break
		}
		a, ok := next(answers, deadline)
		if !ok {
			errs = append(errs, errUnanswered(sent-got))
			failed += sent - got
			break
		}
		slot, agreed, err := judge(a)
		switch {
		case err != nil:
			errs = append(errs, &MasterError{c.masters[a.i].cfg.Name, err})
			failed++
		case agreed:
			granted[slot]++
		default:
			refused++
		}
	}
	return granted, failed, errs, sent - got
}

// errUnanswered stands for the masters that did not answer a round in time.
func errUnanswered(n int) error {
	return &MasterError{fmt.Sprintf("%d master(s)", n), context.DeadlineExceeded}
}

// drain waits for the answers a decided round did not read, hands each to
// late (if not nil), then frees the round.
func (c *Cluster) drain(answers <-chan answer, n int, cancel context.CancelFunc, late func(answer)) {
	if n == 0 {
		cancel()
		return
	}
	c.goBackground(func() {
		for range n {
			a := <-answers
			if late != nil {
				late(a)
			}
		}
		cancel()
	})
}

// quarantineLeft reads a script's {-2, ms} refusal: the master is
// quarantined for ms more. It notes it and returns the error to count.
func (c *Cluster) quarantineLeft(i int, vals []int64) error {
	if len(vals) == 2 && vals[0] == -2 {
		c.masters[i].quarantined(time.Duration(vals[1]) * time.Millisecond)
		return ErrQuarantined
	}
	return nil
}

// Refusal is what the masters answered a round that did not win the name.
type Refusal struct {
	Kind        error         // ErrBusy, ErrNoQuorum or ErrConflict
	Yes         int           // masters that granted (a split vote when > 0)
	Busy        int           // masters that answered that others hold the name
	Needed      int           // the quorum
	HeldLimit   int           // for ErrConflict: the limit the name is held with (1: a lock)
	RetryAfter  time.Duration // for ErrBusy: the longest remaining lease among the busy answers (0: none)
	BestSlot    int           // the slot most masters granted: the one to ask for next
	OnlyReaders bool          // for ErrBusy: only shared holders kept an exclusive claim out
	Masters     []error       // each failed master's error
}

// Err is the refusal as an error for the edge (the wire code mapping):
// errors.Is(r.Err(), ErrBusy) etc. A nil refusal is a nil error.
func (r *Refusal) Err() error {
	if r == nil {
		return nil
	}
	return &RoundError{Kind: r.Kind, Yes: r.Yes, Needed: r.Needed, Masters: r.Masters, HeldLimit: r.HeldLimit}
}

// noQuorum is a refusal of a round that never reached a majority for causes.
func (c *Cluster) noQuorum(causes []error) *Refusal {
	return &Refusal{Kind: ErrNoQuorum, Needed: c.quorum, Masters: causes}
}

// Acquire tries once to win req.Name on a majority. It returns as soon as the
// outcome is certain. On failure it releases whatever it won, and returns
// what the masters answered: a Refusal of ErrBusy when they answered that
// someone else holds the name, of ErrConflict when a majority holds it for
// another kind of claim, else of ErrNoQuorum (also when the round never
// got its turn: ErrOverloaded or ctx's error is then among Masters). The
// error is for a round that could not run at all: ErrClosed, an invalid slot.
func (c *Cluster) Acquire(ctx context.Context, req AcquireRequest) (Grant, *Refusal, error) {
	if c.closed() {
		return Grant{}, nil, ErrClosed
	}
	if l := req.Claim.limit(); req.Claim.Slot < 0 || req.Claim.Slot > l || (l == 1 && req.Claim.Slot != 0) {
		return Grant{}, nil, fmt.Errorf("quorum: slot %d of a claim with limit %d", req.Claim.Slot, l)
	}
	done, err := c.admit(ctx, c.cfg.AdmitTimeout)
	if err != nil {
		var round *RoundError
		errors.As(err, &round)
		return Grant{}, c.noQuorum(round.Masters), nil
	}
	defer done()
	start := c.clock.Now()
	n := len(c.masters)
	to, errs := c.voters()
	if len(errs) > n-c.quorum {
		// A majority is out of reach before anything is sent: writing a
		// grant to the few voters left would only be undone by a release.
		return Grant{}, c.noQuorum(errs), nil
	}
	keys, args := c.acquireArgs(req)
	answers, cancel, timeout := c.fanout(ctx, OpAcquire, acquireScript, keys, args, to)
	sent := len(to)
	fences := make([]int64, n) // > 0 where granted
	slots := make([]int, n)    // the slot granted there
	round := c.noQuorum(nil)
	var busyOn []int           // masters that answered held: their counters may lag
	conflicts, readers := 0, 0 // readers: busy answers where only shared holders block
	granted, failed, errs, unread := c.collect(answers, sent, timeout, errs, func(a answer) (int, bool, error) {
		vals, err := a.res.AsIntSlice()
		switch {
		case err != nil:
			return 0, false, err
		case len(vals) == 3 && vals[0] == 1:
			fences[a.i], slots[a.i] = vals[1], int(vals[2])
			return slots[a.i], true, nil
		case len(vals) != 2 && len(vals) != 3:
			return 0, false, errors.New("unexpected acquire reply")
		case vals[0] == -3:
			conflicts++
			round.HeldLimit = int(vals[1])
			return 0, false, nil
		}
		if err := c.quarantineLeft(a.i, vals); err != nil {
			return 0, false, err
		}
		busyOn = append(busyOn, a.i)
		round.RetryAfter = max(round.RetryAfter, time.Duration(vals[1])*time.Millisecond)
		if len(vals) == 3 && vals[2] == 1 {
			readers++
		}
		return 0, false, nil
	})
	yes := 0
	for _, g := range granted {
		yes += g
	}
	busy := len(busyOn) + conflicts
	outcome, slot := DecideSlots(n, granted, busy+failed)
	round.Yes, round.Masters, round.BestSlot, round.Busy = yes, errs, slot, len(busyOn)
	round.OnlyReaders = readers > 0 && readers == len(busyOn)
	if outcome == Won {
		for i := range fences { // the masters that granted another slot give it back
			if fences[i] > 0 && slots[i] != slot {
				fences[i] = 0
				c.releaseOn(req.Name, req.Holder, i)
			}
		}
		record := c.holderKey(req.Name, req.Holder)
		fence, err := c.settleFence(ctx, req.Name, record, req.block(), fences)
		if err == nil && len(busyOn) > 0 {
			c.raiseFence(req.Name, record, fence, req.block(), busyOn)
		}
		// Masters whose answer was not read yet are brought up to the
		// fence as their answers come: a master that missed this grant must
		// not count below it in a later majority. One that granted another
		// slot gives it back.
		c.drain(answers, unread, cancel, func(a answer) {
			vals, err := a.res.AsIntSlice()
			switch {
			case err != nil || fence == 0:
			case len(vals) == 3 && vals[0] == 1 && int(vals[2]) != slot:
				c.releaseOn(req.Name, req.Holder, a.i)
			case len(vals) != 3 || vals[1] != fence:
				c.raiseFence(req.Name, record, fence, req.block(), []int{a.i})
			}
		})
		validity := Validity(req.Lease, c.clock.Now().Sub(start), c.cfg.DriftFactor)
		if err == nil && validity > 0 {
			claim := req.Claim
			claim.Slot = slot
			return Grant{Fence: fence, Slot: slot, Record: Record{Claim: claim, Fence: fence, Top: fence + req.block() - 1, Who: req.Who},
				Deadline: start.Add(Validity(req.Lease, 0, c.cfg.DriftFactor))}, nil, nil
		}
		if err == nil {
			err = errors.New("validity used up before the grant completed")
		}
		round.Masters = append(round.Masters, err)
	} else {
		c.drain(answers, unread, cancel, nil)
		switch {
		case conflicts >= c.quorum:
			// A majority holds the name for another kind of claim: waiting
			// would not help.
			round.Kind = ErrConflict
		case failed <= n-c.quorum:
			// Enough masters answered that, uncontended, a majority was
			// possible: the name is held elsewhere (or the vote split). Only
			// failures that alone rule out a majority make it NO_QUORUM.
			round.Kind = ErrBusy
		}
	}
	if yes > 0 || busy < sent {
		// Something may have been granted (or may yet be, by an answer not
		// read): give it back. A round every master refused granted nothing.
		c.releaseAsync(req.Name, req.Holder)
	}
	return Grant{}, round, nil
}

// acquireArgs are the acquire script's keys and arguments for req.
func (c *Cluster) acquireArgs(req AcquireRequest) (keys, args []string) {
	keys = []string{c.setKey(req.Name), c.fenceKey(req.Name), c.holderKey(req.Name, req.Holder), c.markerKey(),
		c.queueKey(req.Name), c.deadlinesKey(req.Name)}
	entry := ""
	if req.Entry != nil {
		entry = req.Entry.Member()
	}
	args = append([]string{req.Holder, strconv.FormatInt(req.Lease.Milliseconds(), 10), c.holderPrefix(req.Name)}, c.gateArgs()...)
	args = append(args, string(req.Claim.mode()), strconv.Itoa(req.Claim.limit()), strconv.Itoa(req.Claim.Slot),
		req.Who.Agent, strconv.Itoa(req.Who.PID), strconv.Itoa(req.Who.UID), req.Who.Owner, strconv.FormatInt(req.Who.SinceMilli, 10), entry,
		strconv.FormatInt(req.block(), 10))
	return keys, args
}

// settleFence makes the grant's fence strictly greater than every earlier
// grant's: the token is the highest counter among the granting majority, and
// it (with the end of its block: see acquireSrc; every master granted the
// same block size, so the highest fence ends the highest block) is written
// back to every granting master behind it before the grant is
// answered (so that the majority of the next grant, which must overlap this
// one, counts past it), with the record fixed to carry it. With a majority
// in step, as when uncontended, nothing is waited for.
func (c *Cluster) settleFence(ctx context.Context, name, record string, block int64, fences []int64) (int64, error) {
	var fence int64
	for _, f := range fences {
		fence = max(fence, f)
	}
	atFence := 0
	var behind []int
	for i, f := range fences {
		switch {
		case f == fence:
			atFence++
		case f > 0:
			behind = append(behind, i)
		}
	}
	if atFence >= c.quorum {
		if len(behind) > 0 { // a majority is in step: the rest need not hold up the grant
			c.raiseFence(name, record, fence, block, behind)
		}
		return fence, nil
	}
	c.cfg.Observer.FenceWriteBack(len(behind), true)
	opCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.MasterTimeout)
	defer cancel()
	keys, args := c.raiseFenceArgs(name, record, fence, block)
	results := make(chan error, len(behind))
	for _, i := range behind {
		go func() {
			_, err := c.masters[i].eval(opCtx, raiseFenceScript, keys, args).AsInt64()
			results <- err
		}()
	}
	var errs []error
	for range behind {
		if err := <-results; err != nil {
			errs = append(errs, err)
		} else {
			atFence++
		}
	}
	if atFence < c.quorum {
		return 0, &MasterError{"fence", errors.Join(errs...)}
	}
	return fence, nil
}

// raiseFenceArgs are raiseFenceSrc's keys and arguments: name's counter to
// the end of fence's block, and the record (a holder key; "": none) to carry
// fence.
func (c *Cluster) raiseFenceArgs(name, record string, fence, block int64) (keys, args []string) {
	keys = []string{c.fenceKey(name)}
	if record != "" {
		keys = append(keys, record)
	}
	return keys, []string{strconv.FormatInt(fence, 10), strconv.FormatInt(fence+block-1, 10)}
}

// raiseFence brings req's name's counter on the masters to at least the end
// of fence's block (and a record of req there to carry fence), in the background.
func (c *Cluster) raiseFence(name, record string, fence, block int64, to []int) {
	c.cfg.Observer.FenceWriteBack(len(to), false)
	keys, args := c.raiseFenceArgs(name, record, fence, block)
	c.goBackground(func() {
		ctx, cancel := context.WithTimeout(context.Background(), max(20*c.cfg.MasterTimeout, time.Second))
		defer cancel()
		for _, i := range to {
			c.masters[i].eval(ctx, raiseFenceScript, keys, args)
		}
	})
}

// Reserve reserves a further block of fences for holder's hold of name,
// which its agent passes among local holders (see
// AcquireRequest.FenceBlock), and returns the block's first fence. It
// counts as a grant does: a majority that still has the hold each takes
// block fences from its counter, the first fence is the highest of
// theirs, so past every fence any grant (and the hold's earlier blocks)
// gave out, and the block's end is settled on that majority before it
// returns, so every later grant counts past it. The record keeps the
// fence of its current holder. It waits for its turn among rounds
// (MaxRounds) like a grant, and the Observer counts its calls as acquires.
func (c *Cluster) Reserve(ctx context.Context, name, holder string, block int) (int64, error) {
	if c.closed() {
		return 0, ErrClosed
	}
	done, err := c.admit(ctx, c.cfg.AdmitTimeout)
	if err != nil {
		return 0, err
	}
	defer done()
	n := len(c.masters)
	to, errs := c.voters()
	if len(errs) > n-c.quorum {
		return 0, &RoundError{Kind: ErrNoQuorum, Needed: c.quorum, Masters: errs}
	}
	keys := []string{c.setKey(name), c.fenceKey(name), c.holderKey(name, holder), c.markerKey()}
	args := append(append([]string{holder}, c.gateArgs()...), strconv.Itoa(block))
	answers, cancel, timeout := c.fanout(ctx, OpAcquire, reserveScript, keys, args, to)
	fences := make([]int64, n) // > 0 where reserved
	granted, _, errs, unread := c.collect(answers, len(to), timeout, errs, func(a answer) (int, bool, error) {
		vals, err := a.res.AsIntSlice()
		switch {
		case err != nil:
			return 0, false, err
		case len(vals) == 2 && vals[0] == 1:
			fences[a.i] = vals[1]
			return 0, true, nil
		}
		return 0, false, c.quarantineLeft(a.i, vals)
	})
	c.drain(answers, unread, cancel, nil) // a late block is the master's own: it only counts past it
	if granted[0] < c.quorum {
		return 0, &RoundError{Kind: ErrNoQuorum, Needed: c.quorum, Yes: granted[0], Masters: errs}
	}
	return c.settleFence(ctx, name, "", int64(block), fences)
}

// releaseOn gives back, on master i alone, a grant of a slot that lost.
func (c *Cluster) releaseOn(name, holder string, i int) {
	keys, args := c.releaseArgs(name, holder, c.giveBack)
	c.goBackground(func() {
		ctx, cancel := context.WithTimeout(context.Background(), max(20*c.cfg.MasterTimeout, time.Second))
		defer cancel()
		c.masters[i].eval(ctx, releaseScript, keys, args)
	})
}

// releaseArgs are the release script's keys and arguments; message is the
// release message: the name for a release, c.giveBack or c.handover.
func (c *Cluster) releaseArgs(name, holder, message string) (keys, args []string) {
	return []string{c.setKey(name), c.holderKey(name, holder)},
		[]string{holder, c.channel(name), message, strconv.FormatInt(c.cfg.Tombstone.Milliseconds(), 10)}
}

// releaseAsync gives back a failed round's partial grants in the background.
// Its release message wakes other agents' waiters (the round's grants may
// have landed late on every master and look like a holder to them) but not
// this agent's own, which would only fail again at once. If the release
// lands before an acquire still on its way (waiting for a batch, say), its
// tombstone makes that acquire refuse.
func (c *Cluster) releaseAsync(name, holder string) {
	c.goBackground(func() { c.release(context.Background(), name, holder, c.giveBack) })
}

// Release drops holder's hold of name on every connected master and wakes
// waiters anywhere. A release must not be dropped: a key left behind blocks
// the name for a whole lease. So each master's release has a long deadline
// and goes on in the background past the return, and it goes to masters
// marked down too, to land when they answer again. The caller waits only
// until a majority answered (or every master it sent to), at most
// min(2×MasterTimeout, 1s): a hung master costs a release nothing. It
// returns how many of the masters that answered held it; errors only when
// none answered.
func (c *Cluster) Release(ctx context.Context, name, holder string) (int, error) {
	return c.release(ctx, name, holder, name)
}

// HandOver is Release by an agent that held name for a run of its local
// holders while another agent waited (see Wanted), and now stands back:
// its message wakes other agents' waiters as a recheck (Watch.Recheck), so
// that an attempt that fails says nothing about contention and costs no
// back-off, and this agent's own waiters not at all.
func (c *Cluster) HandOver(ctx context.Context, name, holder string) (int, error) {
	return c.release(ctx, name, holder, c.handover)
}

func (c *Cluster) release(ctx context.Context, name, holder, message string) (int, error) {
	keys, args := c.releaseArgs(name, holder, message)
	held := 0
	var errs []error
	ok := c.everywhere(ctx, OpRelease, releaseScript, keys, args, func(a answer) error {
		v, err := a.res.AsInt64()
		if err != nil {
			errs = append(errs, &MasterError{c.masters[a.i].cfg.Name, err})
		}
		held += int(v)
		return err
	})
	if ok == 0 {
		return 0, &RoundError{Kind: ErrNoQuorum, Needed: c.quorum, Masters: errs}
	}
	return held, nil
}

// everywhere runs a script that must not be dropped (a write-back, a
// removal) on every connected master, down ones too, with a long deadline
// that goes on in the background past the return, as Release does. It
// waits until a majority answered, or at most min(2×MasterTimeout, 1s),
// and returns how many answered without error (by judge, if not nil: it
// reads each answer that comes in time).
func (c *Cluster) everywhere(ctx context.Context, op Op, s *script, keys, args []string, judge func(answer) error) int {
	timeout := max(20*c.cfg.MasterTimeout, time.Second)
	opCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	answers := make(chan answer, len(c.masters))
	sent := 0
	for i, m := range c.masters {
		if m.getClient() == nil {
			continue
		}
		sent++
		go c.call(opCtx, i, op, s, time.Now().Add(timeout), keys, args, func(r rueidis.RedisResult) { answers <- answer{i, r} })
	}
	wait := time.NewTimer(min(2*c.cfg.MasterTimeout, time.Second))
	defer wait.Stop()
	got, ok := 0, 0
collect:
	for ; got < sent && ok < c.quorum; got++ {
		select {
		case a := <-answers:
			err := a.res.Error()
			if judge != nil {
				err = judge(a)
			}
			if err == nil {
				ok++
			}
		case <-wait.C:
			break collect
		}
	}
	c.drain(answers, sent-got, cancel, nil)
	return ok
}

// releaseChunk is how many releases ReleaseMany pipelines to a master at once.
const releaseChunk = 1024

// ReleaseMany releases many holds at once, as a closing session or a
// stopping agent does: on every connected master (down ones too: see
// Release), in pipelined chunks on the bulk connection, with no goroutine
// per hold. It returns when every master answered or its deadline passed
// (max(20×MasterTimeout, 1s), plus 10µs per hold); a release that did not
// land leaves its lease to expire.
func (c *Cluster) ReleaseMany(ctx context.Context, holds []RenewKey) {
	if len(holds) == 0 {
		return
	}
	calls := make([]call, len(holds))
	for i, h := range holds {
		keys, args := c.releaseArgs(h.Name, h.Holder, h.Name)
		calls[i] = call{keys: keys, args: args}
	}
	opCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx),
		max(20*c.cfg.MasterTimeout, time.Second)+time.Duration(len(holds))*10*time.Microsecond)
	defer cancel()
	var wg sync.WaitGroup
	for _, m := range c.masters {
		if m.conn(laneBulk) == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for lo := 0; lo < len(calls) && opCtx.Err() == nil; lo += releaseChunk {
				m.evalMulti(opCtx, releaseScript, calls[lo:min(lo+releaseChunk, len(calls))])
			}
		}()
	}
	wg.Wait()
}

// ErrNotHeld: a majority of masters answered that the holder no longer holds the name.
var ErrNotHeld = errors.New("quorum: not held")

// Downgrade makes holder's exclusive hold of name shared on a majority, and
// wakes the name's waiters anywhere. Until it succeeds the hold stays
// exclusive: more than it needs, never less.
func (c *Cluster) Downgrade(ctx context.Context, name, holder string) error {
	done, err := c.admit(ctx, c.cfg.AdmitTimeout)
	if err != nil {
		return err
	}
	defer done()
	to, errs := c.voters()
	answers, cancel, timeout := c.fanout(ctx, OpDowngrade, downgradeScript, []string{c.holderKey(name, holder)}, []string{c.channel(name), name}, to)
	granted, _, errs, unread := c.collect(answers, len(to), timeout, errs, func(a answer) (int, bool, error) {
		v, err := a.res.AsInt64()
		return 0, err == nil && v == 1, err
	})
	c.drain(answers, unread, cancel, nil)
	if granted[0] < c.quorum {
		return &RoundError{Kind: ErrNoQuorum, Yes: granted[0], Needed: c.quorum, Masters: errs}
	}
	return nil
}

// renewArgs are the renew script's keys and arguments for holds, each with
// its own lease (lease where it has none).
func (c *Cluster) renewArgs(lease time.Duration, holds []RenewKey) (keys, args []string) {
	keys = make([]string, 0, 1+2*len(holds))
	keys = append(keys, c.markerKey())
	args = make([]string, 0, 2+2*len(holds))
	args = append(args, c.gateArgs()...)
	for _, h := range holds {
		l := h.Lease
		if l <= 0 {
			l = lease
		}
		if h.Entry {
			keys = append(keys, c.queueKey(h.Name), c.deadlinesKey(h.Name))
			args = append(args, h.Holder, "q"+strconv.FormatInt(l.Milliseconds(), 10))
			continue
		}
		keys = append(keys, c.setKey(h.Name), c.holderKey(h.Name, h.Holder))
		args = append(args, h.Holder, strconv.FormatInt(l.Milliseconds(), 10))
	}
	return keys, args
}

// renewReply reads master i's answer to a renew script call: one 1 (renewed)
// or 0 (gone) per hold.
func (c *Cluster) renewReply(i int, res rueidis.RedisResult, n int) ([]int64, error) {
	vals, err := res.AsIntSlice()
	switch {
	case err != nil:
		return nil, err
	case c.quarantineLeft(i, vals) != nil:
		return nil, ErrQuarantined
	case len(vals) != n+1 || vals[0] != 0:
		return nil, errors.New("unexpected renew reply")
	}
	return vals[1:], nil
}

// Extend sets holder's lease on name to lease on a majority and returns the
// new validity deadline. It fails with ErrNotHeld when a majority no longer
// has the hold, else with ErrNoQuorum.
func (c *Cluster) Extend(ctx context.Context, name, holder string, lease time.Duration) (time.Time, error) {
	done, err := c.admit(ctx, c.cfg.AdmitTimeout)
	if err != nil {
		return time.Time{}, err
	}
	defer done()
	start := c.clock.Now()
	n := len(c.masters)
	keys, args := c.renewArgs(lease, []RenewKey{{Name: name, Holder: holder}})
	to, errs := c.voters()
	answers, cancel, timeout := c.fanout(ctx, OpExtend, renewScript, keys, args, to)
	sent := len(to)
	gone := 0
	granted, failed, errs, unread := c.collect(answers, sent, timeout, errs, func(a answer) (int, bool, error) {
		vals, err := c.renewReply(a.i, a.res, 1)
		if err == nil && vals[0] == 0 {
			gone++
		}
		return 0, err == nil && vals[0] == 1, err
	})
	yes := granted[0]
	no := gone + failed
	c.drain(answers, unread, cancel, nil)
	if Decide(n, yes, no) == Won && Validity(lease, c.clock.Now().Sub(start), c.cfg.DriftFactor) > 0 {
		return start.Add(Validity(lease, 0, c.cfg.DriftFactor)), nil
	}
	if gone > n-c.quorum {
		return time.Time{}, ErrNotHeld
	}
	return time.Time{}, &RoundError{Kind: ErrNoQuorum, Yes: yes, Needed: c.quorum, Masters: errs}
}

// renewBatch is how many holds one renew script call carries, and
// renewChunk how many such calls go to a master at once: a chunk at a time,
// so that a large renewal does not fill the connection's buffers at once.
const (
	renewBatch = 256
	renewChunk = 16
)

// Renew sets the lease of every hold in keys on every voting master, in
// pipelined chunks of script calls of renewBatch holds each, and counts the
// answers per hold. Then it repairs: a hold that a majority renewed but
// some voting master lacks (that master was down at the grant, or let the
// key expire while paused) is re-created there, so that it regains its
// full redundancy before the next fault.
func (c *Cluster) Renew(ctx context.Context, lease time.Duration, keys []RenewKey) []RenewResult {
	out := make([]RenewResult, len(keys))
	if len(keys) == 0 {
		return out
	}
	var calls []call
	for lo := 0; lo < len(keys); lo += renewBatch {
		k, a := c.renewArgs(lease, keys[lo:min(lo+renewBatch, len(keys))])
		calls = append(calls, call{keys: k, args: a})
	}
	to, _ := c.voters()
	gone := make([][]int, len(c.masters)) // per master, the holds it lacks
	// A round may take up to a quarter lease: validity counts from before
	// it began, so a slow round is safe, and cutting a busy master's
	// renewal short would lose holds that it was about to keep.
	roundCtx, cancelRound := context.WithTimeout(ctx, max(c.cfg.MasterTimeout, lease/4))
	defer cancelRound()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, i := range to {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for first := 0; first < len(calls) && roundCtx.Err() == nil; first += renewChunk {
				chunk := calls[first:min(first+renewChunk, len(calls))]
				lo := first * renewBatch
				start := time.Now() // latency, not lease logic: see timedEval
				res := c.masters[i].evalMulti(roundCtx, renewScript, chunk)
				c.cfg.Observer.MasterOp(i, OpRenew, time.Since(start))
				mu.Lock()
				for b, r := range res {
					at := lo + b*renewBatch
					vals, err := c.renewReply(i, r, min(renewBatch, len(keys)-at))
					if err != nil {
						continue
					}
					for j, v := range vals {
						if v == 1 {
							out[at+j].OK++
						} else {
							out[at+j].Gone++
							gone[i] = append(gone[i], at+j)
						}
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	c.repair(ctx, lease, keys, out, gone)
	return out
}

// repair re-creates, on each master, the holds of gone that a majority renewed.
func (c *Cluster) repair(ctx context.Context, lease time.Duration, keys []RenewKey, out []RenewResult, gone [][]int) {
	ms := strconv.FormatInt(lease.Milliseconds(), 10)
	opCtx, cancel := context.WithTimeout(ctx, c.cfg.MasterTimeout)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i, holds := range gone {
		var idx []int
		var calls []call
		for _, h := range holds {
			k := keys[h]
			if out[h].OK < c.quorum || k.Record.Fence == 0 {
				continue
			}
			idx = append(idx, h)
			ms := ms
			if k.Lease > 0 {
				ms = strconv.FormatInt(k.Lease.Milliseconds(), 10)
			}
			args := append([]string{k.Holder, ms, c.holderPrefix(k.Name)}, c.gateArgs()...)
			calls = append(calls, call{
				keys: []string{c.setKey(k.Name), c.fenceKey(k.Name), c.holderKey(k.Name, k.Holder), c.markerKey()},
				args: append(append(args, k.Record.fields()...), strconv.FormatInt(max(k.Record.Top, k.Record.Fence), 10)),
			})
		}
		if len(calls) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := c.masters[i].evalMulti(opCtx, repairScript, calls)
			mu.Lock()
			defer mu.Unlock()
			for j, r := range res {
				if v, err := r.AsInt64(); err == nil && v == 2 {
					out[idx[j]].Repaired++
				}
			}
		}()
	}
	wg.Wait()
	for i, r := range out {
		if r.Repaired > 0 {
			c.cfg.Logger.Debug("hold re-created on masters that lacked it", "name", keys[i].Name, "masters", r.Repaired)
		}
	}
}

// Who returns the holders of name that a majority of the voting masters
// record, with the highest fence any of them recorded.
func (c *Cluster) Who(ctx context.Context, name string) ([]Holder, error) {
	done, err := c.admit(ctx, c.cfg.AdmitTimeout)
	if err != nil {
		return nil, err
	}
	defer done()
	to, errs := c.voters()
	answers, cancel, timeout := c.fanout(ctx, OpWho, whoScript, []string{c.setKey(name)}, []string{c.holderPrefix(name)}, to)
	sent := len(to)
	defer cancel() // the fan-out's goroutines answer into a buffered channel: none is left blocked
	type seen struct {
		h     Holder
		count int
	}
	byID := map[string]*seen{}
	var order []string
	ok := 0
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for got := range sent {
		a, answered := next(answers, deadline)
		if !answered {
			errs = append(errs, errUnanswered(sent-got))
			break
		}
		vals, err := a.res.ToArray()
		if err != nil {
			errs = append(errs, &MasterError{c.masters[a.i].cfg.Name, err})
			continue
		}
		ok++
		width := 1 + len(recordFields)
		for j := 0; j+width <= len(vals); j += width {
			id, _ := vals[j].ToString()
			f := make([]string, len(recordFields))
			for k := range f {
				f[k], _ = vals[j+1+k].ToString()
			}
			r := recordOf(f)
			s := byID[id]
			if s == nil {
				s = &seen{h: Holder{ID: id, Record: r}}
				byID[id] = s
				order = append(order, id)
			}
			s.count++
			s.h.Record.Fence = max(s.h.Record.Fence, r.Fence)
		}
	}
	if ok < c.quorum {
		return nil, &RoundError{Kind: ErrNoQuorum, Yes: ok, Needed: c.quorum, Masters: errs}
	}
	var out []Holder
	for _, id := range order {
		if s := byID[id]; s.count >= c.quorum {
			out = append(out, s.h)
		}
	}
	return out, nil
}

// Watch is a subscription to the release messages of one name. C receives
// (coalesced) when the name may have been released anywhere, and whenever a
// master (re)subscribes, since messages sent while it was away are lost.
type Watch struct {
	c       *Cluster
	channel string
	wake    chan struct{}
	recheck chan struct{}
	wanted  chan struct{}
	once    sync.Once
}

// C returns the wake-up channel.
func (w *Watch) C() <-chan struct{} { return w.wake }

// Wanted receives (coalesced) when another agent said it waits for the name
// (see Cluster.Wanted). Messages are lost while a master is unreachable:
// it is a hint for fairness, never a fact to be safe by.
func (w *Watch) Wanted() <-chan struct{} { return w.wanted }

// Recheck receives (coalesced) when a master confirmed the subscription: a
// release before it would have been missed, so look again. It is not a
// release: an attempt it prompts that fails says nothing about contention.
func (w *Watch) Recheck() <-chan struct{} { return w.recheck }

// Watch subscribes to name's release messages on every master. It returns
// at once: each master's subscription is made in the background (a hung
// master holds up nothing), and C receives when one is confirmed, since a
// release before it would have been missed.
func (c *Cluster) Watch(ctx context.Context, name string) *Watch {
	w := &Watch{c: c, channel: c.channel(name), wake: make(chan struct{}, 1), recheck: make(chan struct{}, 1), wanted: make(chan struct{}, 1)}
	c.watchMu.Lock()
	set := c.watches[w.channel]
	if set == nil {
		set = map[*Watch]struct{}{}
		c.watches[w.channel] = set
	}
	set[w] = struct{}{}
	first := len(set) == 1
	c.watchMu.Unlock()
	if first {
		for _, m := range c.masters {
			c.goBackground(func() {
				ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 4*c.cfg.MasterTimeout)
				defer cancel()
				if m.subscribe(ctx, w.channel) {
					c.watchMu.Lock()
					for w := range c.watches[w.channel] {
						signal(w.recheck)
					}
					c.watchMu.Unlock()
				}
			})
		}
	}
	return w
}

// Close ends the watch; the last watch of a name unsubscribes it.
func (w *Watch) Close() {
	w.once.Do(func() {
		c := w.c
		c.watchMu.Lock()
		set := c.watches[w.channel]
		delete(set, w)
		last := len(set) == 0
		if last {
			delete(c.watches, w.channel)
		}
		c.watchMu.Unlock()
		if last && !c.closed() {
			go c.eachMaster(context.Background(), func(ctx context.Context, m *master) { m.unsubscribe(ctx, w.channel) })
		}
	})
}

func (c *Cluster) eachMaster(ctx context.Context, f func(context.Context, *master)) {
	ctx, cancel := context.WithTimeout(ctx, 4*c.cfg.MasterTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, m := range c.masters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(ctx, m)
		}()
	}
	wg.Wait()
}

func (c *Cluster) onMessage(channel, message string) {
	if message == c.giveBack {
		return
	}
	if strings.HasPrefix(message, handoverPrefix) {
		if message != c.handover {
			c.watchMu.Lock()
			for w := range c.watches[channel] {
				signal(w.recheck)
			}
			c.watchMu.Unlock()
		}
		return
	}
	if strings.HasPrefix(message, wantedPrefix) {
		// Not a release: it must not wake waiters, whose attempts would
		// fail and say so again.
		if message != c.wanted {
			c.watchMu.Lock()
			for w := range c.watches[channel] {
				signal(w.wanted)
			}
			c.watchMu.Unlock()
		}
		return
	}
	c.watchMu.Lock()
	defer c.watchMu.Unlock()
	for w := range c.watches[channel] {
		w.signal()
	}
}

// wantedPrefix starts the message of Wanted, handoverPrefix that of
// HandOver; no name has a space.
const (
	wantedPrefix   = "wanted "
	handoverPrefix = "handover "
)

// Wanted tells the agent that holds name, if it watches the name, that this
// agent has a waiter for it: an agent that passes a name among its local
// holders (see AcquireRequest.FenceBlock) then gives it up within its
// bounds. It publishes on every connected master, in the background, and
// returns at once; a message can be lost (a master down, or the holder's
// subscription not yet made), so it serves fairness only.
func (c *Cluster) Wanted(name string) {
	if c.closed() {
		return
	}
	ch := c.channel(name)
	c.goBackground(func() {
		c.eachMaster(context.Background(), func(ctx context.Context, m *master) {
			if cl := m.conn(laneRounds); cl != nil {
				cl.Do(ctx, cl.B().Publish().Channel(ch).Message(c.wanted).Build())
			}
		})
	})
}

// Retag makes holder's record of name on every master that has it carry r's
// fence and who-info: the hold was passed to another local holder, and WHO
// should name it. It returns when every master answered or its deadline
// (4×MasterTimeout) passed, and says on how many it landed. A master that
// missed it keeps the earlier holder's fence and who-info, which only WHO
// reads, until a renewal re-creates the record.
func (c *Cluster) Retag(ctx context.Context, name, holder string, r Record) int {
	if c.closed() {
		return 0
	}
	f := r.fields() // recordFields order: fence is 3, who-info 4..8
	keys, args := []string{c.holderKey(name, holder)}, append([]string{f[3]}, f[4:]...)
	var n atomic.Int32
	c.eachMaster(ctx, func(ctx context.Context, m *master) {
		if v, err := m.eval(ctx, retagScript, keys, args).AsInt64(); err == nil && v == 1 {
			n.Add(1)
		}
	})
	return int(n.Load())
}

func (c *Cluster) wakeAll() {
	c.watchMu.Lock()
	defer c.watchMu.Unlock()
	for _, set := range c.watches {
		for w := range set {
			w.signal()
		}
	}
}

func (w *Watch) signal() { signal(w.wake) }

// signal sends on a coalescing channel without waiting.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (c *Cluster) watchedChannels() []string {
	c.watchMu.Lock()
	defer c.watchMu.Unlock()
	out := make([]string, 0, len(c.watches))
	for ch := range c.watches {
		out = append(out, ch)
	}
	return out
}

func (c *Cluster) watched(channel string) bool {
	c.watchMu.Lock()
	defer c.watchMu.Unlock()
	return len(c.watches[channel]) > 0
}

// Bootstrap plants an epoch marker with no quarantine on each of masters
// that has none, and returns the names of those it planted on. It is for
// masters known to be new, that never served a lock (the -dev masters, a
// new deployment): a master that lost its data looks the same, and
// bootstrapping it instead of letting it sit out its quarantine can grant a
// name that a forgotten hold still protects.
func Bootstrap(ctx context.Context, keyPrefix string, masters []MasterConfig) ([]string, error) {
	c, err := New(Config{Masters: masters, KeyPrefix: keyPrefix})
	if err != nil {
		return nil, err
	}
	var planted []string
	var errs []error
	for _, m := range c.masters {
		m.connect()
		if m.getClient() == nil {
			errs = append(errs, &MasterError{m.cfg.Name, m.lastErr})
			continue
		}
		v, err := m.eval(ctx, bootstrapScript, []string{c.markerKey()}, []string{"bootstrap:" + randomID()}).AsInt64()
		m.close()
		switch {
		case err != nil:
			errs = append(errs, &MasterError{m.cfg.Name, err})
		case v == 1:
			planted = append(planted, m.cfg.Name)
		}
	}
	return planted, errors.Join(errs...)
}

func randomID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
