package quorum

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lock-agent/lock-agent/quorum/rules"
	"github.com/lock-agent/lock-agent/quorum/scripts"
	"github.com/redis/rueidis"
)

// A round sends one script to the masters and reads their answers; every
// quorum operation is one (see vote). Its steps:
//   - admission: it waits its turn among the rounds in flight (MaxRounds);
//   - voters: it goes to the masters that may vote now, the rest count as failed;
//   - fan-out: one call per master (the hot scripts batched: see master.go),
//     each allowed the round's budget;
//   - collection: answers are read until the outcome is certain, decided by
//     the pure functions of quorum/rules; a master silent past the masters'
//     timeout (roundTimeout) is waited for, a timeout at a time, to the
//     round's budget while the probe trusts it (see Patience): a slow master
//     is not a dead one;
//   - late answers: those a decided round did not read are drained in the
//     background, each handed to the round's late, if it has one.
//
// A round that must land (roundSpec.land) skips the first two steps.

// roundSpec is what a round sends and how it reads the answers.
type roundSpec struct {
	op         Op
	script     *scripts.Script
	keys, args []string
	// judge reads one master's answer: the slot it granted (0 for a lock)
	// and whether it agreed, or the master's failure. nil: an answer that
	// is not an error agrees.
	judge func(answer) (slot int, agreed bool, err error)
	// early sends nothing when the voters cannot make a majority: writing a
	// grant to the few left would only be undone by a release.
	early bool
	// whole reads every answer that comes in time, not only until the
	// outcome is certain; or, with enough, until enough says the answers
	// read so far will do (a slow master is not waited for).
	whole  bool
	enough func() bool
	// budget, if set, bounds how long the round may wait for slow answers
	// under the cluster's patience: for a grant, a quarter of its lease, so
	// that a grant decided late still delivers three quarters of it.
	budget time.Duration
	// land is for a script that must not be dropped (a release, a
	// write-back, a removal): it needs no turn, goes to every connected
	// master, down ones too, with a long deadline that goes on in the
	// background past the round, and the round waits only until a majority
	// agreed (or, as any round, until its silent masters are no longer
	// waited for: see Patience).
	land bool
	// decide, if not nil, runs once the answers are in, while the round
	// still holds its turn; it may set the round's late.
	decide func(*round)
}

// round is the tally of a round's answers.
type round struct {
	start   time.Time   // when it got its turn, on the Cluster's clock: validity counts from here
	sent    int         // masters it was sent to
	to      []int       // which
	granted map[int]int // agreeing answers per slot
	failed  int         // masters that failed, did not answer or could not vote
	errs    []error     // each failed master's error
	// late, if set by decide, is handed each answer that came after the
	// round was decided.
	late func(answer)
}

// yes is how many masters agreed, on any slot.
func (r *round) yes() int {
	yes := 0
	for _, g := range r.granted {
		yes += g
	}
	return yes
}

// Refusal is what the masters answered a round that did not win the name.
type Refusal struct {
	Kind        error         // ErrBusy, ErrNoQuorum, ErrConflict or ErrSettings
	Yes         int           // masters that granted (a split vote when > 0)
	Busy        int           // masters that answered that others hold the name
	Needed      int           // the quorum
	HeldLimit   int           // for ErrConflict: the limit the name is held with (1: a lock)
	RetryAfter  time.Duration // for ErrBusy: how long until a majority may have the name free (see rules.FreeOnMajorityIn; 0: no busy answer)
	BestSlot    int           // the slot most masters granted: the one to ask for next
	OnlyReaders bool          // for ErrBusy: only shared holders kept an exclusive claim out
	// OnlyCached says, for ErrBusy, that on some busy master only records
	// their agents keep cached (no client holds them) were in the claim's
	// way: saying so (Wanted) makes those agents give the name up. Some, not
	// all: a mark lands on each master in its own time (see MarkCached),
	// and a give-back of an earlier failed attempt may still be in the
	// way on another; a name a client holds shows no mark but in the
	// moments after its cache lent it.
	OnlyCached bool
	// OnlyKept says, for ErrBusy, that on some busy master only records
	// that caching agents keep (see CacheOrRelease) were in the claim's
	// way, marked cached or not: lent to a client of that agent, or back
	// in its cache with the mark not yet written. The agent answers a
	// Wanted at once: it releases a record no client holds, and says Held
	// of one a client does. Like OnlyCached, some, not all.
	OnlyKept bool
	Masters  []error // each failed master's error
	Size     int     // how many masters the cluster has
}

// Err is the refusal as an error for the edge (the wire code mapping):
// errors.Is(r.Err(), ErrBusy) etc. A nil refusal is a nil error.
func (r *Refusal) Err() error {
	if r == nil {
		return nil
	}
	return &RoundError{Kind: r.Kind, Yes: r.Yes, Needed: r.Needed, Masters: r.Masters, HeldLimit: r.HeldLimit, Size: r.Size}
}

// noQuorum is a refusal of a round that never reached a majority for
// causes: of ErrSettings when masters that record other settings alone
// ruled one out.
func (c *Cluster) noQuorum(causes []error) *Refusal {
	return &Refusal{Kind: c.failedKind(causes), Needed: c.quorum, Masters: causes, Size: len(c.masters)}
}

// noQuorumErr is the error of a round that missed a majority: of
// ErrSettings when masters that record other settings alone ruled one out.
func (c *Cluster) noQuorumErr(r *round) error {
	return &RoundError{Kind: c.failedKind(r.errs), Yes: r.yes(), Needed: c.quorum, Masters: r.errs, Size: len(c.masters)}
}

// failedKind is the kind of a round that missed a majority with the
// masters' errors errs: ErrSettings or ErrNoQuorum.
func (c *Cluster) failedKind(errs []error) error {
	if c.settingsKind(errs) {
		return ErrSettings
	}
	return ErrNoQuorum
}

// vote runs one round of spec: admission, voters, fan-out, collection,
// spec.decide, then the late answers. It returns a refusal of ErrNoQuorum
// when the round never ran: its turn did not come (ErrOverloaded, or ctx's
// error), or, for spec.early, too few masters may vote.
func (c *Cluster) vote(ctx context.Context, spec roundSpec) (*round, *Refusal) {
	r := &round{}
	var to []int
	if spec.land {
		to = c.connected()
	} else {
		done, err := c.admit(ctx, c.cfg.AdmitTimeout)
		if err != nil {
			return nil, c.noQuorum([]error{err})
		}
		defer done()
		r.start = c.clock.Now()
		to, r.errs = c.voters()
		if spec.early && len(r.errs) > len(c.masters)-c.quorum {
			return nil, c.noQuorum(r.errs)
		}
	}
	answers, cancel, wait, budget := c.fanout(ctx, spec, to)
	r.sent, r.to = len(to), to
	unread := c.collect(r, spec, answers, wait, budget)
	if spec.decide != nil {
		spec.decide(r)
	}
	c.drain(answers, unread, cancel, r.late)
	return r, nil
}

// majorityErr is why a round that needed a majority failed: the refusal
// that kept it from running, or ErrNoQuorum (a *RoundError) when fewer
// than a quorum agreed; nil when a majority did.
func (c *Cluster) majorityErr(r *round, never *Refusal) error {
	switch {
	case never != nil:
		return never.Err()
	case r.yes() < c.quorum:
		return c.noQuorumErr(r)
	}
	return nil
}

// admit waits for a round's turn, at most budget, and returns its release,
// or why the turn did not come: ErrOverloaded, or ctx's error. A request
// already ended (its session closed, its wait over) gets no turn, free or
// not: its round would cost the masters for an answer no one reads, and a
// closing session waits for its requests (a storm's hundreds of WHOs
// queued in turn ran one round each after the client left).
func (c *Cluster) admit(ctx context.Context, budget time.Duration) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
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
		return nil, ErrOverloaded
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// answer is one master's reply in a round.
type answer struct {
	i    int
	res  rueidis.RedisResult
	took time.Duration // from its call to its answer
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

// connected returns the masters that have a connection, down ones too.
func (c *Cluster) connected() (to []int) {
	for i, m := range c.masters {
		if m.getClient() != nil {
			to = append(to, i)
		}
	}
	return to
}

// fanout sends spec's script to the masters to, and returns where their
// answers come, how long the round waits for silent masters (the masters'
// timeout: see roundTimeout) and how long at most for slow ones (its
// budget, which each call is allowed). A round that lands waits as long,
// for a majority, and its calls go on to the cluster's patience.
func (c *Cluster) fanout(ctx context.Context, spec roundSpec, to []int) (answers <-chan answer, cancel context.CancelFunc, wait, budget time.Duration) {
	wait, budget = c.roundTimeout(to), c.budget(ctx, spec)
	timeout := max(wait, budget)
	if spec.land {
		timeout = c.patience()
	}
	opCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	out := make(chan answer, len(to))
	answers = out
	for _, i := range to {
		m := c.masters[i]
		if err := m.slotVoteErr(spec); err != nil {
			out <- answer{i: i, res: rueidis.NewErrorResult(err)}
			continue
		}
		start := time.Now()
		answered := func(r rueidis.RedisResult) { out <- answer{i, r, time.Since(start)} }
		go c.call(opCtx, i, spec.op, spec.script, start.Add(timeout), spec.keys, spec.args, answered)
	}
	return answers, cancel, wait, budget
}

// call runs s on master i and hands answered its reply. The hot scripts'
// calls may wait for a batch instead (see batcher, master.go), so it must be called
// in a goroutine of its own that may end before the reply: answered is
// then called by the goroutine that sends the batch.
func (c *Cluster) call(ctx context.Context, i int, op Op, s *scripts.Script, deadline time.Time, keys, args []string, answered func(rueidis.RedisResult)) {
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

// roundTimeout is how long a round waits for a silent master when the
// others answered promptly: the largest of the masters' timeouts (each
// its RTT estimate's mean + 4×deviation, never under MasterTimeout: see
// RTT). The largest, for a busy host slows every master's answers alike
// (the agent's own CPU counts in what they measure), and a paused
// master's estimate stays what it was before it fell silent.
func (c *Cluster) roundTimeout(to []int) time.Duration {
	d := c.cfg.MasterTimeout
	for _, i := range to {
		d = max(d, c.masters[i].timeout())
	}
	return d
}

// patience is the longest any round waits for answers that come late:
// max(20×MasterTimeout, 1s). Renewals do not go through vote (their
// rounds have lease/4); a grant's budget is at most a quarter of its lease.
func (c *Cluster) patience() time.Duration {
	return max(20*c.cfg.MasterTimeout, time.Second)
}

// budget is how long a round of spec may wait for late answers (see
// Patience): the cluster's patience, at most spec.budget and what is left
// of ctx's deadline.
func (c *Cluster) budget(ctx context.Context, spec roundSpec) time.Duration {
	b := c.patience()
	if spec.budget > 0 {
		b = min(b, spec.budget)
	}
	if dl, ok := ctx.Deadline(); ok {
		b = min(b, time.Until(dl))
	}
	return max(b, 0)
}

// timedEval is master i's eval, timed for the Observer. Latency is not
// lease logic: it reads the monotonic clock, not the Cluster's Clock.
func (c *Cluster) timedEval(ctx context.Context, op Op, i int, s *scripts.Script, keys, args []string) rueidis.RedisResult {
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

// collect reads r's answers into r until its outcome is certain (see
// decided) or the masters that have not answered are taken to have failed:
// after wait (the masters' timeout) or some multiple of it, at most budget,
// once the probe doubts every one of them (see Patience). It returns how many answers were left unread
// (for drain). spec.judge says which slot an answer granted (0 for a
// lock), or that it refused, or the error of a master that failed.
func (c *Cluster) collect(r *round, spec roundSpec, answers <-chan answer, wait, budget time.Duration) (unread int) {
	judge := spec.judge
	if judge == nil {
		judge = func(a answer) (int, bool, error) { err := a.res.Error(); return 0, err == nil, err }
	}
	r.granted = map[int]int{}
	r.failed = len(r.errs)
	refused := 0
	start := time.Now()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	due := wait               // when the deadline is set to fire, after start
	var stalled time.Duration // how much later than due the deadline fired, in all
	answered := make([]bool, len(c.masters))
	host := hostWait{c: c, base: c.host.Load(), start: start}
	got := 0
	for ; got < r.sent; got++ {
		if c.decided(spec, r, refused) {
			break
		}
		a, ok := next(answers, deadline)
		for !ok {
			now := time.Now()
			waited := now.Sub(start)
			stalled += max(waited-due, 0)
			if p := rules.Patience(waited, waited-due, wait, budget, c.trusted(r.to, answered, start, now, max(stalled, host.since()))); p > 0 {
				due = p
				deadline.Reset(p - waited)
				a, ok = next(answers, deadline)
				continue
			}
			r.errs = append(r.errs, errUnanswered(r.sent-got, waited))
			r.failed += r.sent - got
			return r.sent - got
		}
		answered[a.i] = true
		if err := a.res.Error(); a.took > 0 && a.took <= wait && (err == nil || !errors.Is(err, context.DeadlineExceeded)) {
			// An answer the round read within its first step tells the
			// master's answer time. One after the round gave up does not,
			// nor one it waited on for (see Patience): either may be a
			// paused master's, resumed, and counted it would stretch the
			// master's timeout, so that its next outage is waited out
			// longer, and each pause resumed in time stretches it more
			// (Karn's rule: no sample from a retransmitted segment).
			c.masters[a.i].answeredIn(a.took)
		}
		slot, agreed, err := judge(a)
		switch {
		case err != nil:
			r.errs = append(r.errs, &MasterError{c.masters[a.i].cfg.Name, gateRefusal(err, c.cfg.Settings)})
			r.failed++
		case agreed:
			r.granted[slot]++
		default:
			refused++
		}
	}
	return r.sent - got
}

// hostSample is a reading of Config.HostWaited, taken at.
type hostSample struct {
	at     time.Time
	waited time.Duration
}

// sampleHost reads the host's CPU wait (Config.HostWaited), or returns
// the last reading if it is younger than a quarter of MasterTimeout: the
// probes take one at least every ProbeInterval, rounds that wait for a
// silent master one per step. Nil where unknown.
func (c *Cluster) sampleHost() *hostSample {
	if c.cfg.HostWaited == nil {
		return nil
	}
	now := time.Now()
	if last := c.host.Load(); last != nil && now.Sub(last.at) < c.cfg.MasterTimeout/4 {
		return last
	}
	waited, ok := c.cfg.HostWaited()
	if !ok {
		return nil
	}
	s := &hostSample{at: now, waited: waited}
	c.host.Store(s)
	return s
}

// hostWait measures how long the host's tasks waited for a CPU over a
// round that started at start: from the newest reading at its start (base;
// else the first one after it) to each later one, and no more than the
// time since start. It reads only for a round still undecided at its
// first step's end; a round decided before reads nothing. The reading at
// its start may be up to a ProbeInterval older than it: the wait counted
// may then include some from before the round, which only makes it wait
// longer for a silent master, within its budget.
type hostWait struct {
	c     *Cluster
	base  *hostSample
	start time.Time
}

// since is how long the host's tasks waited for a CPU since the round's
// start, as far as the readings tell.
func (h *hostWait) since() time.Duration {
	now := h.c.sampleHost()
	switch {
	case now == nil:
		return 0
	case h.base == nil:
		h.base = now
		return 0
	}
	return max(min(now.waited-h.base.waited, now.at.Sub(h.start)), 0)
}

// trusted counts the masters of to that have not answered a round that
// started at start, stood stalled that long (its timers late, or the
// host's tasks waiting for a CPU), and still waits for them at
// now (see Trusted).
func (c *Cluster) trusted(to []int, answered []bool, start, now time.Time, stalled time.Duration) int {
	n := 0
	for _, i := range to {
		if m := c.masters[i]; !answered[i] && rules.Trusted(m.doubted(), now.Sub(m.heardSince(start)), stalled, m.timeout()) {
			n++
		}
	}
	return n
}

// decided says whether the answers read so far make r's outcome certain:
// by DecideSlots, or for a round that lands once a majority agreed (the
// rest of its answers are waited for only while the first are missing).
// A round that reads every answer is decided only when they are in, or
// its enough says so.
func (c *Cluster) decided(spec roundSpec, r *round, refused int) bool {
	switch {
	case spec.whole:
		return spec.enough != nil && spec.enough()
	case spec.land:
		return r.yes() >= c.quorum
	}
	o, _ := rules.DecideSlots(len(c.masters), r.granted, r.failed+refused)
	return o != rules.Pending
}

// errUnanswered stands for the n masters that did not answer a round that
// waited for them that long.
func errUnanswered(n int, waited time.Duration) error {
	return &MasterError{fmt.Sprintf("%d master(s)", n), &NoAnswerError{Waited: waited}}
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

// Op names an operation on one master, for an Observer.
type Op int

// The operations an Observer times on each master.
const (
	OpAcquire Op = iota // an acquire round's script
	OpRenew             // a watchdog batch: one pipelined round trip
	OpExtend            // unused since EXTEND asks no master; kept for the metric series
	OpRelease
	OpWho
	OpDowngrade // an exclusive hold made shared
	OpEnqueue   // a queue entry given its ticket, or the ticket settled
	OpDequeue   // queue entries removed
	OpSet       // a hold's value replaced (SET)
	NumOps      // how many Ops there are
)

var opNames = [NumOps]string{"acquire", "renew", "extend", "release", "who", "downgrade", "enqueue", "dequeue", "set"}

// String returns the op's name: acquire, renew, extend, release, who or downgrade.
func (o Op) String() string {
	if o < 0 || o >= NumOps {
		return "unknown"
	}
	return opNames[o]
}

// Observer hears what the cluster does, for metrics. Masters are named by
// their index in Config.Masters, so that an observer can keep one
// precreated series per master. Its methods are called from many
// goroutines, some on the request path: they must be safe for concurrent
// use, cheap, and never block.
type Observer interface {
	// MasterOp: master answered one op (or failed it, or gave up at its
	// deadline) after d.
	MasterOp(master int, op Op, d time.Duration)
	// Quarantined: master entered quarantine (it lost its data).
	Quarantined(master int)
	// FenceWriteBack: a grant's fence was written back to masters whose
	// counter was behind it. waited says the grant waited for it (no
	// majority of the granting masters was in step); otherwise it runs in
	// the background.
	FenceWriteBack(masters int, waited bool)
}

// NopObserver is an Observer that ignores everything: the default.
type NopObserver struct{}

// MasterOp does nothing.
func (NopObserver) MasterOp(int, Op, time.Duration) {}

// Quarantined does nothing.
func (NopObserver) Quarantined(int) {}

// FenceWriteBack does nothing.
func (NopObserver) FenceWriteBack(int, bool) {}
