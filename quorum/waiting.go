package quorum

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/lock-agent/lock-agent/quorum/rules"
	"github.com/lock-agent/lock-agent/quorum/scripts"
)

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
