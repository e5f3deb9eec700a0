package quorum

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/lock-agent/lock-agent/quorum/rules"
	"github.com/lock-agent/lock-agent/quorum/scripts"
)

// Who waits for a name, as the masters keep it: the entries of its fair
// queue (Enqueue, Dequeue), which order the claims that must wait, and each
// agent's waiting record (SetWaiting, WaitingFor), which WHO shows.

// Entry is one waiter's place in a name's queue in the masters: a fair=true
// LOCK that has to wait, or an exclusive one that only shared holders block
// (so that readers arriving after it cannot starve it). A claim with an
// entry may pass no conflicting live entry ahead of it; a claim without one
// may pass none at all (see scripts/lua/queue.lua).
type Entry struct {
	// ID is unique across agents and waits: the agent's id and a counter.
	// Equal tickets order by it.
	ID    string
	Claim Claim
}

// Member is the entry as the masters store it: the scripts read its claim
// from it.
func (e Entry) Member() string {
	return e.ID + "|" + string(e.Claim.mode()) + "|" + strconv.Itoa(e.Claim.limit())
}

// Enqueue gives entries (of one agent, in its arrival order) their places
// at the back of name's queue and returns their tickets. It runs two
// rounds: each voting master gives each entry a ticket, then the entries
// are written to every master with the highest ticket a majority gave (a
// settled ticket, like a fence): only then are they queued, so all masters
// order the queue alike, and an entry made after Enqueue returned is
// behind these on any majority. Entries of one
// call keep their order. heartbeat is how long an entry lives on a master
// unless Renew renews it (RenewKey.Entry). A ticket of 0 means the entry had
// left already (see Dequeue). It fails with a *RoundError of ErrNoQuorum
// when either round misses a majority; the entries then may or may not be
// queued on some masters, and their heartbeats lapse unless renewed.
func (c *Cluster) Enqueue(ctx context.Context, name string, entries []Entry, heartbeat time.Duration) ([]int64, error) {
	if c.closed() {
		return nil, ErrClosed
	}
	members := make([]string, len(entries))
	for i, e := range entries {
		members[i] = e.Member()
	}
	ms := strconv.FormatInt(heartbeat.Milliseconds(), 10)
	keys := []string{c.keys.Queue(name), c.keys.Ticket(name), c.keys.Marker()}
	args := append(append(c.gateArgs(), c.keys.LeftPrefix(name)), members...)
	tickets := make([]int64, len(entries))
	var err error
	_, never := c.vote(ctx, roundSpec{op: OpEnqueue, script: scripts.Enqueue, keys: keys, args: args,
		judge: func(a answer) (int, bool, error) {
			vals, err := a.res.AsIntSlice()
			switch {
			case err != nil:
				return 0, false, err
			case c.quarantineLeft(a.i, vals) != nil:
				return 0, false, ErrQuarantined
			case len(vals) != len(entries)+1 || vals[0] != 0:
				return 0, false, errors.New("unexpected enqueue reply")
			}
			for j, t := range vals[1:] {
				if t == 0 || tickets[j] < 0 {
					tickets[j] = -1 // left: it stays out
					continue
				}
				tickets[j] = max(tickets[j], t)
			}
			return 0, true, nil
		},
		decide: func(r *round) {
			if r.yes() < c.quorum {
				err = c.noQuorumErr(r)
				return
			}
			err = c.settleTickets(ctx, name, ms, members, tickets)
		}})
	switch {
	case never != nil:
		return nil, never.Err()
	case err != nil:
		return nil, err
	}
	return tickets, nil
}

// settleTickets writes the tickets (a ticket below 0: the entry left,
// its ticket becomes 0) to every master, and fails unless a majority took them.
func (c *Cluster) settleTickets(ctx context.Context, name string, ms string, members []string, tickets []int64) error {
	keys := []string{c.keys.Queue(name), c.keys.Deadlines(name), c.keys.Ticket(name)}
	settle := []string{ms, c.keys.LeftPrefix(name)}
	for j, t := range tickets {
		if t < 0 {
			tickets[j] = 0
			continue
		}
		settle = append(settle, members[j], strconv.FormatInt(t, 10))
	}
	if len(settle) == 2 {
		return nil
	}
	if ok := c.everywhere(ctx, OpEnqueue, scripts.Settle, keys, settle); ok < c.quorum {
		return &RoundError{Kind: ErrNoQuorum, Yes: ok, Needed: c.quorum}
	}
	return nil
}

// Dequeue takes entries out of name's queue on every master and wakes the
// name's waiters anywhere. Like a release it is not dropped: it goes on in
// the background past the return (see everywhere), and an entry whose
// removal did not land leaves once its heartbeat lapses.
func (c *Cluster) Dequeue(ctx context.Context, name string, entries []Entry) {
	if len(entries) == 0 {
		return
	}
	args := []string{c.keys.Channel(name), name, c.keys.LeftPrefix(name), strconv.FormatInt(c.cfg.Tombstone.Milliseconds(), 10)}
	for _, e := range entries {
		args = append(args, e.Member())
	}
	c.everywhere(ctx, OpDequeue, scripts.Dequeue, []string{c.keys.Queue(name), c.keys.Deadlines(name)}, args)
}

// QueueLen returns how many live entries name's queue has on a majority:
// the most that a majority of the answering masters each count. An entry
// it counts is ahead, on every master, of every entry made after it
// returned (see Enqueue).
func (c *Cluster) QueueLen(ctx context.Context, name string) (int, error) {
	var counts []int
	r, never := c.vote(ctx, roundSpec{op: OpWho, script: scripts.QueueLen, keys: []string{c.keys.Deadlines(name)},
		judge: func(a answer) (int, bool, error) {
			n, err := a.res.AsInt64()
			if err == nil {
				counts = append(counts, int(n))
			}
			return 0, err == nil, err
		}})
	if err := c.majorityErr(r, never); err != nil {
		return 0, err
	}
	return rules.OnMajority(counts, c.quorum), nil
}

// Waiting records (coordination.md §5: WHO lists who waits). Each agent
// that has requests waiting for a name records how many, and since when,
// on the masters, beside the name's other keys:
//
//	P{name}:w    hash: agent instance → "COUNT SINCE_UNIXMS"
//	P{name}:wd   sorted set: agent instance → deadline (ms, master clock)
//
// A record lives until its deadline unless renewed: the watchdog renews it
// in its batch, as a hold (RenewKey.Waiting), so a dead agent's records
// lapse within its lease. Both keys expire with the last deadline, so a
// name nobody waits for leaves nothing behind. Records are a view for
// operators, not a fact anything is safe by: writes are best effort (a
// lost one makes WHO stale for at most a lease), and WHO shows a record
// that a majority of the masters have.

// Waiting is one agent's record of the requests that wait for a name.
type Waiting struct {
	Instance   string // the agent instance that wrote it (Config.InstanceID)
	Agent      string // the agent's id
	Count      int
	SinceMilli int64 // when the oldest of them started waiting (Unix ms)
}

// WaitingKey is the renewal of this agent's waiting record of name, for
// the watchdog's batch.
func (c *Cluster) WaitingKey(name string) RenewKey {
	return RenewKey{Name: name, Holder: c.cfg.InstanceID, Waiting: true}
}

// SetWaiting records on every master that count of this agent's requests
// wait for name, the oldest since sinceMilli, for heartbeat unless renewed
// (WaitingKey); a count of 0 removes the record. Like a release it is not
// dropped (it goes on past the return: see everywhere), and it returns how
// many masters took it in time.
func (c *Cluster) SetWaiting(ctx context.Context, name string, count int, sinceMilli int64, heartbeat time.Duration) int {
	if c.closed() {
		return 0
	}
	args := []string{c.cfg.InstanceID, strconv.Itoa(max(count, 0)), strconv.FormatInt(sinceMilli, 10),
		strconv.FormatInt(max(heartbeat.Milliseconds(), 1), 10)}
	return c.everywhere(ctx, OpWho, scripts.SetWaiting, []string{c.keys.Waiting(name), c.keys.WaitingDeadlines(name)}, args)
}

// WaitingFor returns the agents' waiting records of name that a majority
// of the masters have, in no particular order: each with the count that a
// majority has at least (see OnMajority), and the earliest since.
func (c *Cluster) WaitingFor(ctx context.Context, name string) ([]Waiting, error) {
	seen := map[string][]Waiting{} // by instance, one per master that has it
	r, never := c.vote(ctx, roundSpec{op: OpWho, script: scripts.Waiting, keys: []string{c.keys.Waiting(name), c.keys.WaitingDeadlines(name)}, whole: true,
		judge: func(a answer) (int, bool, error) {
			vals, err := a.res.AsStrSlice()
			if err != nil {
				return 0, false, err
			}
			for j := 0; j+1 < len(vals); j += 2 {
				if w, ok := parseWaiting(vals[j], vals[j+1]); ok {
					seen[vals[j]] = append(seen[vals[j]], w)
				}
			}
			return 0, true, nil
		}})
	if err := c.majorityErr(r, never); err != nil {
		return nil, err
	}
	return mergeWaiting(seen, c.quorum), nil
}

// parseWaiting reads one record: the instance "AGENT/INSTANCE" and its
// value "COUNT SINCE".
func parseWaiting(instance, value string) (Waiting, bool) {
	count, since, ok := strings.Cut(value, " ")
	n, err1 := strconv.Atoi(count)
	ms, err2 := strconv.ParseInt(since, 10, 64)
	if !ok || err1 != nil || err2 != nil || n <= 0 {
		return Waiting{}, false
	}
	agent := instance
	if i := strings.LastIndexByte(instance, '/'); i > 0 {
		agent = instance[:i]
	}
	return Waiting{Instance: instance, Agent: agent, Count: n, SinceMilli: ms}, true
}

// mergeWaiting keeps the records of seen (per instance, one per master)
// that quorum masters have.
func mergeWaiting(seen map[string][]Waiting, quorum int) []Waiting {
	var out []Waiting
	for _, ws := range seen {
		if len(ws) < quorum {
			continue
		}
		counts := make([]int, len(ws))
		merged := ws[0]
		for i, w := range ws {
			counts[i] = w.Count
			merged.SinceMilli = min(merged.SinceMilli, w.SinceMilli)
		}
		merged.Count = rules.OnMajority(counts, quorum)
		out = append(out, merged)
	}
	return out
}
