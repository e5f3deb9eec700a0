package quorum

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/rueidis"
)

// A round sends one script to the masters and reads their answers; every
// quorum operation is one (see vote). Its steps:
//   - admission: it waits its turn among the rounds in flight (MaxRounds);
//   - voters: it goes to the masters that may vote now, the rest count as failed;
//   - fan-out: one call per master (the hot scripts batched: see batch.go),
//     under one deadline (roundTimeout);
//   - collection: answers are read until the outcome is certain, decided by
//     the pure functions of math.go;
//   - late answers: those a decided round did not read are drained in the
//     background, each handed to the round's late, if it has one.
//
// A round that must land (roundSpec.land) skips the first two steps.

// roundSpec is what a round sends and how it reads the answers.
type roundSpec struct {
	op         Op
	script     *script
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
	// land is for a script that must not be dropped (a release, a
	// write-back, a removal): it needs no turn, goes to every connected
	// master, down ones too, with a long deadline that goes on in the
	// background past the round, and the round waits only until a majority
	// agreed, or at most min(2×MasterTimeout, 1s).
	land bool
	// decide, if not nil, runs once the answers are in, while the round
	// still holds its turn; it may set the round's late.
	decide func(*round)
}

// round is the tally of a round's answers.
type round struct {
	start   time.Time   // when it got its turn, on the Cluster's clock: validity counts from here
	sent    int         // masters it was sent to
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
	answers, cancel, wait := c.fanout(ctx, spec, to)
	r.sent = len(to)
	unread := c.collect(r, spec, answers, wait)
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
// or why the turn did not come: ErrOverloaded, or ctx's error.
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
		return nil, ErrOverloaded
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

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
// answers come and how long the round waits for them: the round's deadline
// (see roundTimeout), or for a round that lands min(2×MasterTimeout, 1s)
// of its deadline of max(20×MasterTimeout, 1s).
func (c *Cluster) fanout(ctx context.Context, spec roundSpec, to []int) (<-chan answer, context.CancelFunc, time.Duration) {
	var timeout, wait time.Duration
	if spec.land {
		timeout, wait = max(20*c.cfg.MasterTimeout, time.Second), min(2*c.cfg.MasterTimeout, time.Second)
	} else {
		timeout = c.roundTimeout(to)
		wait = timeout
	}
	opCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	answers := make(chan answer, len(to))
	for _, i := range to {
		m := c.masters[i]
		if err := m.slotVoteErr(spec); err != nil {
			answers <- answer{i, rueidis.NewErrorResult(err)}
			continue
		}
		start := time.Now()
		answered := func(r rueidis.RedisResult) {
			switch {
			case spec.land: // its long deadline says nothing of the master's latency
			case r.Error() == nil || !errors.Is(r.Error(), context.DeadlineExceeded):
				m.observe(time.Since(start))
			default:
				m.observe(timeout)
			}
			answers <- answer{i, r}
		}
		go c.call(opCtx, i, spec.op, spec.script, start.Add(timeout), spec.keys, spec.args, answered)
	}
	return answers, cancel, wait
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

// collect reads r's answers into r until its outcome is certain (see
// decided) or wait passed, and returns how many answers were left unread
// (for drain). spec.judge says which slot an answer granted (0 for a
// lock), or that it refused, or the error of a master that failed.
func (c *Cluster) collect(r *round, spec roundSpec, answers <-chan answer, wait time.Duration) (unread int) {
	judge := spec.judge
	if judge == nil {
		judge = func(a answer) (int, bool, error) { err := a.res.Error(); return 0, err == nil, err }
	}
	r.granted = map[int]int{}
	r.failed = len(r.errs)
	refused := 0
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	got := 0
	for ; got < r.sent; got++ {
		if c.decided(spec, r, refused) {
			break
		}
		a, ok := next(answers, deadline)
		if !ok {
			r.errs = append(r.errs, errUnanswered(r.sent-got))
			r.failed += r.sent - got
			break
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
	o, _ := DecideSlots(len(c.masters), r.granted, r.failed+refused)
	return o != Pending
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
