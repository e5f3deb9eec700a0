package locks

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/protocol"
	"github.com/lock-agent/lock-agent/quorum"
)

var (
	t0     = time.Unix(1000, 0)
	policy = retryPolicy{min: 10 * time.Millisecond, ceiling: 100 * time.Millisecond}
	head   = &Waiter{tag: "head"}
	other  = &Waiter{tag: "other"}
)

// facts is a waiting, subscribed, plain exclusive head of a 3-master
// cluster, decided at t0 with a jitter of 0.5.
func facts(change func(*roundFacts)) roundFacts {
	f := roundFacts{now: t0, jitter: 0.5, name: "n", waiter: head, writer: true, watching: true,
		quorum: 2, lease: 15 * time.Second, retry: policy}
	if change != nil {
		change(&f)
	}
	return f
}

func won() roundOutcome { return roundOutcome{} }

func answered(r quorum.Refusal) roundOutcome {
	if r.Kind == nil {
		r.Kind = quorum.ErrBusy
	}
	return roundOutcome{err: fmt.Errorf("round: %w", r.Kind), refusal: &r}
}

// held is a BUSY answer of every master: the holder has 2s of lease left.
func held() roundOutcome { return answered(quorum.Refusal{Busy: 3, RetryAfter: 2 * time.Second}) }

// splitHeld is a vote a master that missed the holder's grant gave the head.
func splitHeld() roundOutcome {
	return answered(quorum.Refusal{Yes: 1, Busy: 2, RetryAfter: 2 * time.Second, BestSlot: 3})
}

func TestContenderNextDecidesEveryRule(t *testing.T) {
	backoff := func(fails int) time.Time { return t0.Add(policy.after(fails, 0.5)) }
	cases := []struct {
		name  string
		state contender
		out   roundOutcome
		facts roundFacts
		want  contender
		kind  actionKind
		// answer is what the head's answer (answerHead) is; noted is
		// "heard", "no quorum" or "" (not noted).
		answer error
		noted  string
		wake   time.Duration
	}{
		{name: "a won round grants the name and forgets the failures and the outvote",
			state: contender{fails: 3, outvoted: true, woken: true, notBefore: t0}, out: won(), facts: facts(nil),
			want: contender{notBefore: t0}, kind: grantHead, noted: "heard"},
		{name: "a round that was not held answers the head NO_QUORUM at once and notes nothing",
			state: contender{fails: 2}, out: roundOutcome{err: errors.New("quorum: slot 3 of a claim with limit 2")}, facts: facts(nil),
			want: contender{fails: 2}, kind: answerHead, answer: protocol.ErrNoQuorum},
		{name: "a closed cluster (the agent is stopping) answers the head SHUTTING_DOWN",
			out: roundOutcome{err: quorum.ErrClosed}, facts: facts(nil),
			kind: answerHead, answer: protocol.ErrShuttingDown},
		{name: "a name held for another kind of claim answers CONFLICT: waiting would not help",
			out: answered(quorum.Refusal{Kind: quorum.ErrConflict, HeldLimit: 3}), facts: facts(nil),
			want: contender{slotOf: head}, kind: answerHead, answer: protocol.ErrConflict},
		{name: "NO_QUORUM for a wait=0 LOCK answers NO_QUORUM at once",
			out: answered(quorum.Refusal{Kind: quorum.ErrNoQuorum, Yes: 1}), facts: facts(func(f *roundFacts) { f.wait0 = true }),
			want: contender{slotOf: head}, kind: answerHead, answer: protocol.ErrNoQuorum},
		{name: "NO_QUORUM for a waiting LOCK backs off and keeps trying, noting that no majority answered",
			state: contender{fails: 1}, out: answered(quorum.Refusal{Kind: quorum.ErrNoQuorum}), facts: facts(nil),
			want: contender{fails: 2, notBefore: backoff(2), slotOf: head}, kind: retry, noted: "no quorum"},
		{name: "NO_QUORUM keeps trying however long it lasts: the head's wait ends it, not the contender",
			state: contender{fails: 40}, out: answered(quorum.Refusal{Kind: quorum.ErrNoQuorum}), facts: facts(nil),
			want: contender{fails: 41, notBefore: backoff(41), slotOf: head}, kind: retry, noted: "no quorum"},
		{name: "BUSY for a wait=0 LOCK answers BUSY",
			out: held(), facts: facts(func(f *roundFacts) { f.wait0 = true }),
			want: contender{slotOf: head}, kind: answerHead, answer: quorum.ErrBusy, noted: "heard"},
		{name: "BUSY of only cached records for a wait=0 LOCK says it is wanted and waits for their release, trying again every wantedEvery until the bound",
			out:   answered(quorum.Refusal{Busy: 3, RetryAfter: 2 * time.Second, OnlyCached: true}),
			facts: facts(func(f *roundFacts) { f.wait0, f.tryWait = true, 200*time.Millisecond }),
			want:  contender{slotOf: head, cachedFor: head, cachedUntil: t0.Add(200 * time.Millisecond)},
			kind:  awaitCached, noted: "heard", wake: wantedEvery},
		{name: "BUSY of only cached records again within the bound waits the rest of it",
			state: contender{cachedFor: head, cachedUntil: t0.Add(50 * time.Millisecond)},
			out:   answered(quorum.Refusal{Busy: 2, RetryAfter: 2 * time.Second, OnlyCached: true}),
			facts: facts(func(f *roundFacts) { f.wait0, f.tryWait = true, 200*time.Millisecond }),
			want:  contender{slotOf: head, cachedFor: head, cachedUntil: t0.Add(50 * time.Millisecond)},
			kind:  awaitCached, noted: "heard", wake: 50 * time.Millisecond},
		{name: "BUSY of other records within the bound, after cached ones, tries again soon",
			state: contender{cachedFor: head, cachedUntil: t0.Add(50 * time.Millisecond)},
			out:   answered(quorum.Refusal{Yes: 1, Busy: 1, RetryAfter: 2 * time.Second}),
			facts: facts(func(f *roundFacts) { f.wait0, f.tryWait = true, 200*time.Millisecond }),
			want:  contender{slotOf: head, cachedFor: head, cachedUntil: t0.Add(50 * time.Millisecond)},
			kind:  awaitCached, noted: "heard", wake: policy.min},
		{name: "BUSY of only cached records after the bound answers BUSY",
			state: contender{cachedFor: head, cachedUntil: t0},
			out:   answered(quorum.Refusal{Busy: 2, RetryAfter: 2 * time.Second, OnlyCached: true}),
			facts: facts(func(f *roundFacts) { f.wait0, f.tryWait = true, 200*time.Millisecond }),
			want:  contender{slotOf: head, cachedFor: head, cachedUntil: t0},
			kind:  answerHead, answer: quorum.ErrBusy, noted: "heard"},
		{name: "BUSY of records another agent keeps as caches, the cached mark not yet written, says it is wanted and waits for their release",
			out:   answered(quorum.Refusal{Busy: 2, RetryAfter: 2 * time.Second, OnlyKept: true}),
			facts: facts(func(f *roundFacts) { f.wait0, f.tryWait = true, 200*time.Millisecond }),
			want:  contender{slotOf: head, cachedFor: head, cachedUntil: t0.Add(200 * time.Millisecond)},
			kind:  awaitCached, noted: "heard", wake: wantedEvery},
		{name: "BUSY of kept records after their agent said a client holds the name answers BUSY within the bound",
			state: contender{cachedFor: head, cachedUntil: t0.Add(150 * time.Millisecond), heldFor: head},
			out:   answered(quorum.Refusal{Busy: 2, RetryAfter: 2 * time.Second, OnlyCached: true, OnlyKept: true}),
			facts: facts(func(f *roundFacts) { f.wait0, f.tryWait = true, 200*time.Millisecond }),
			want:  contender{slotOf: head, cachedFor: head, cachedUntil: t0.Add(150 * time.Millisecond), heldFor: head},
			kind:  answerHead, answer: quorum.ErrBusy, noted: "heard"},
		{name: "a word that a client holds the name, heard for an earlier head, does not answer this one",
			state: contender{heldFor: other},
			out:   answered(quorum.Refusal{Busy: 2, RetryAfter: 2 * time.Second, OnlyKept: true}),
			facts: facts(func(f *roundFacts) { f.wait0, f.tryWait = true, 200*time.Millisecond }),
			want:  contender{slotOf: head, cachedFor: head, cachedUntil: t0.Add(200 * time.Millisecond), heldFor: other},
			kind:  awaitCached, noted: "heard", wake: wantedEvery},
		{name: "BUSY of only this agent's own cached record (lent) answers a wait=0 LOCK BUSY at once",
			out:   answered(quorum.Refusal{Busy: 3, RetryAfter: 2 * time.Second, OnlyCached: true}),
			facts: facts(func(f *roundFacts) { f.wait0, f.ownCache, f.tryWait = true, true, 200*time.Millisecond }),
			want:  contender{slotOf: head},
			kind:  answerHead, answer: quorum.ErrBusy, noted: "heard"},
		{name: "BUSY of only cached records parks a waiting LOCK no longer than the bound: it says again that it waits",
			out:   answered(quorum.Refusal{Busy: 3, RetryAfter: 2 * time.Second, OnlyCached: true}),
			facts: facts(func(f *roundFacts) { f.cacheWait = 200 * time.Millisecond }),
			want:  contender{slotOf: head},
			kind:  park, noted: "heard", wake: 200 * time.Millisecond},
		{name: "BUSY for a fair LOCK without a place in the masters' queue takes one, then tries again",
			out: held(), facts: facts(func(f *roundFacts) { f.fair, f.watching = true, false }),
			want: contender{slotOf: head}, kind: enterQueue, noted: "heard"},
		{name: "BUSY for a writer that only readers keep out takes a place in the masters' queue",
			out: answered(quorum.Refusal{Busy: 3, RetryAfter: time.Second, OnlyReaders: true}), facts: facts(nil),
			want: contender{slotOf: head}, kind: enterQueue, noted: "heard"},
		{name: "BUSY for a reader that only readers keep out does not take a place: it parks",
			out: answered(quorum.Refusal{Busy: 3, RetryAfter: time.Second, OnlyReaders: true}), facts: facts(func(f *roundFacts) { f.writer = false }),
			want: contender{slotOf: head}, kind: park, noted: "heard", wake: time.Second},
		{name: "BUSY for a fair LOCK that has its place already does not ask again: it parks",
			out: held(), facts: facts(func(f *roundFacts) { f.fair, f.hasEntry = true, true }),
			want: contender{slotOf: head}, kind: park, noted: "heard", wake: 2 * time.Second},
		{name: "the first BUSY subscribes, then tries again at once: a release before the subscription would be missed",
			out: held(), facts: facts(func(f *roundFacts) { f.watching = false }),
			want: contender{slotOf: head}, kind: subscribe, noted: "heard"},
		{name: "BUSY with the holder's lease left parks until a release message or that lease's end",
			state: contender{fails: 2}, out: held(), facts: facts(nil),
			want: contender{fails: 2, slotOf: head}, kind: park, noted: "heard", wake: 2 * time.Second},
		{name: "a parked head looks again after a lease at the latest, whatever the holder's lease",
			out: answered(quorum.Refusal{Busy: 3, RetryAfter: time.Hour}), facts: facts(nil),
			want: contender{slotOf: head}, kind: park, noted: "heard", wake: 15 * time.Second},
		{name: "BUSY right after a wake-up counts as a failure: the message freed nothing the head could get",
			state: contender{fails: 1, woken: true}, out: held(), facts: facts(nil),
			want: contender{fails: 2, slotOf: head}, kind: park, noted: "heard", wake: 2 * time.Second},
		{name: "a holder with no lease left is backed off from with jitter, not parked on",
			out: answered(quorum.Refusal{Busy: 3}), facts: facts(nil),
			want: contender{fails: 1, notBefore: backoff(1), slotOf: head}, kind: retry, noted: "heard"},
		{name: "a split vote backs off with jitter that release messages do not cut",
			state: contender{fails: 2}, out: answered(quorum.Refusal{Yes: 1, Busy: 1, RetryAfter: time.Second, BestSlot: 2}), facts: facts(nil),
			want: contender{fails: 3, notBefore: backoff(3), slotOf: head, slot: 2}, kind: retry, noted: "heard"},
		{name: "a split vote right after a wake-up backs off too",
			state: contender{woken: true}, out: answered(quorum.Refusal{Yes: 2, Busy: 1, RetryAfter: time.Second}), facts: facts(nil),
			want: contender{fails: 1, notBefore: backoff(1), slotOf: head}, kind: retry, noted: "heard"},
		{name: "a split held on a majority waits for the holder's release, as a busy answer does",
			out: splitHeld(), facts: facts(nil),
			want: contender{outvoted: true, slotOf: head, slot: 3}, kind: park, noted: "heard", wake: 2 * time.Second},
		{name: "a split held on a majority after a wake-up, once not outvoted before, still waits for the release",
			state: contender{woken: true}, out: splitHeld(), facts: facts(nil),
			want: contender{outvoted: true, slotOf: head, slot: 3}, kind: park, noted: "heard", wake: 2 * time.Second},
		{name: "outvoted again right after a wake-up, the head backs off: contenders must not split in lock step",
			state: contender{outvoted: true, woken: true}, out: splitHeld(), facts: facts(nil),
			want: contender{outvoted: true, fails: 1, notBefore: backoff(1), slotOf: head, slot: 3}, kind: retry, noted: "heard"},
		{name: "outvoted again after the timer (no wake-up) waits for the release again",
			state: contender{outvoted: true}, out: splitHeld(), facts: facts(nil),
			want: contender{outvoted: true, slotOf: head, slot: 3}, kind: park, noted: "heard", wake: 2 * time.Second},
		{name: "a plain busy answer after an outvote ends the outvote",
			state: contender{outvoted: true}, out: held(), facts: facts(nil),
			want: contender{slotOf: head}, kind: park, noted: "heard", wake: 2 * time.Second},
		{name: "a refused round's best slot is remembered for its waiter, replacing another waiter's",
			state: contender{slotOf: other, slot: 1}, out: answered(quorum.Refusal{Yes: 1, Busy: 1, RetryAfter: time.Second, BestSlot: 2}), facts: facts(nil),
			want: contender{fails: 1, notBefore: backoff(1), slotOf: head, slot: 2}, kind: retry, noted: "heard"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, act := tc.state.next(tc.out, tc.facts)
			if got != tc.want {
				t.Errorf("state %+v, want %+v", got, tc.want)
			}
			if act.kind != tc.kind {
				t.Errorf("action %d, want %d", act.kind, tc.kind)
			}
			if (act.answer == nil) != (tc.answer == nil) || !errors.Is(act.answer, tc.answer) {
				t.Errorf("answer %v, want %v", act.answer, tc.answer)
			}
			noted := ""
			switch {
			case act.noted && act.noQuorum == nil:
				noted = "heard"
			case act.noted:
				noted = "no quorum"
			}
			if noted != tc.noted {
				t.Errorf("noted %q, want %q", noted, tc.noted)
			}
			if act.wake != tc.wake {
				t.Errorf("wake %v, want %v", act.wake, tc.wake)
			}
		})
	}
}

func TestContenderWokeBacksOffUnlessQuiet(t *testing.T) {
	now := t0.Add(time.Second)
	cases := []struct {
		name  string
		state contender
		wake  wake
		want  contender
	}{
		{name: "the timer is no wake-up: the next attempt goes at once and counts nothing",
			state: contender{fails: 2, notBefore: t0}, wake: wake{parked: time.Second},
			want: contender{fails: 2, notBefore: t0}},
		{name: "a release message with no failures behind it is acted on at once",
			wake: wake{woken: true, parked: time.Millisecond},
			want: contender{woken: true}},
		{name: "a release message after failures backs off first",
			state: contender{fails: 2}, wake: wake{woken: true, parked: time.Millisecond},
			want: contender{fails: 2, woken: true, notBefore: now.Add(policy.after(2, 0.5))}},
		{name: "a release message after a quiet spell as long as the back-off's ceiling forgets the failures",
			state: contender{fails: 5, notBefore: t0}, wake: wake{woken: true, parked: policy.ceiling},
			want: contender{woken: true, notBefore: t0}},
		{name: "a release message just short of a quiet spell still backs off",
			state: contender{fails: 5}, wake: wake{woken: true, parked: policy.ceiling - time.Millisecond},
			want: contender{fails: 5, woken: true, notBefore: now.Add(policy.after(5, 0.5))}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := tc.wake
			w.now, w.jitter, w.retry = now, 0.5, policy
			if got := tc.state.woke(w); got != tc.want {
				t.Errorf("state %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestBackoffDoublesFromRetryMinToTheCeilingWithinItsUpperHalf(t *testing.T) {
	cases := []struct {
		name     string
		policy   retryPolicy
		fails    int
		low, top time.Duration
	}{
		{name: "the first failure waits half to all of retry_min", policy: policy, fails: 1, low: 5 * time.Millisecond, top: 10 * time.Millisecond},
		{name: "each further failure doubles it", policy: policy, fails: 3, low: 20 * time.Millisecond, top: 40 * time.Millisecond},
		{name: "it stops growing at the ceiling", policy: policy, fails: 5, low: 50 * time.Millisecond, top: 100 * time.Millisecond},
		{name: "however many failures there were", policy: policy, fails: 1000, low: 50 * time.Millisecond, top: 100 * time.Millisecond},
		{name: "a retry_min of 0 starts from a millisecond", policy: retryPolicy{ceiling: 100 * time.Millisecond}, fails: 1, low: 500 * time.Microsecond, top: time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.policy.after(tc.fails, 0); got != tc.low {
				t.Errorf("least draw: %v, want %v", got, tc.low)
			}
			if got := tc.policy.after(tc.fails, 0.9999999999); got != tc.top {
				t.Errorf("greatest draw: %v, want %v", got, tc.top)
			}
			for i := range 100 {
				if got := tc.policy.after(tc.fails, float64(i)/100); got < tc.low || got > tc.top {
					t.Errorf("draw %d%%: %v outside [%v, %v]", i, got, tc.low, tc.top)
				}
			}
		})
	}
}

func TestTheCeilingIsRetryMaxOrStuckRetryWhicheverIsLonger(t *testing.T) {
	for _, tc := range []struct {
		retryMax, want time.Duration
	}{{50 * time.Millisecond, stuckRetry}, {time.Second, time.Second}} {
		a := &Manager{cfg: Config{RetryMin: time.Millisecond, RetryMax: tc.retryMax}}
		if got := a.retryPolicy().ceiling; got != tc.want {
			t.Errorf("retry_max %v: ceiling %v, want %v", tc.retryMax, got, tc.want)
		}
	}
}

func TestOutcomeOfTellsARefusalFromAFailureWithoutARound(t *testing.T) {
	ref := &quorum.Refusal{Kind: quorum.ErrBusy, Yes: 1, Busy: 2, Needed: 2}
	if o := outcomeOf(ref, nil); o.refusal != ref || !errors.Is(o.err, quorum.ErrBusy) {
		t.Fatalf("a refusal: %+v", o)
	}
	if o := outcomeOf(nil, quorum.ErrClosed); o.refusal != nil || !errors.Is(o.err, quorum.ErrClosed) {
		t.Fatalf("a closed cluster: %+v", o)
	}
	if o := outcomeOf(nil, nil); o.err != nil || o.refusal != nil {
		t.Fatalf("a grant: %+v", o)
	}
}
