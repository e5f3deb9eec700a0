package quorum

import (
	"context"
	"strconv"
	"time"

	"github.com/lock-agent/lock-agent/quorum/rules"
	"github.com/lock-agent/lock-agent/quorum/scripts"
)

// Mode is how a claim shares a name.
type Mode string

// The modes of a claim.
const (
	Exclusive Mode = "exclusive" // alone
	Shared    Mode = "shared"    // with other shared claims (a read lock)
)

// Claim is what a holder asks of a name. The zero Claim is an exclusive
// lock.
type Claim struct {
	Mode Mode // "" is Exclusive
	// Limit is 1 (or 0) for a lock, K > 1 for a semaphore of K slots:
	// every holder of a name must claim the same K.
	Limit int
	// Slot is, for a semaphore, the slot wanted (0: the lowest free one).
	Slot int
}

func (c Claim) mode() Mode {
	if c.Mode == "" {
		return Exclusive
	}
	return c.Mode
}

func (c Claim) limit() int { return max(c.Limit, 1) }

// Who is what a hold records of its holder, for WHO.
type Who struct {
	Agent      string
	PID, UID   int
	Owner      string
	SinceMilli int64 // when the hold began, Unix ms
	// Value is what the holder attached to the hold (LOCK value=, SET):
	// "" when nothing. The agent checks it (protocol.ValidValue).
	Value string
}

// recordFields are the fields of a holder's record hash, in the order the
// scripts take and return them.
var recordFields = []string{"mode", "limit", "slot", "fence", "agent", "pid", "uid", "owner", "since", "value"}

// Record is a hold as the masters keep it: a hash with its own PX lease.
type Record struct {
	Claim Claim
	Fence int64
	// Top is the last fence of the block the grant reserved (see
	// AcquireRequest.FenceBlock): a master that re-creates the record
	// raises its counter to it. It is not one of the hash's fields.
	Top int64
	Who Who
	// Tail is the grant's (AcquireRequest.Tail), and MinUntil the end of
	// its MinHold on the agent's clock, counted from when the grant
	// completed (no earlier than on any master): a master that re-creates
	// the record gives it the tail with what is left of the MinHold, so
	// that the tail outlives masters that lost it (see scripts/lua/repair.lua). Neither
	// is one of the hash's fields.
	Tail     Tail
	MinUntil time.Time
	// Cached says its agent keeps the record with no client holding it
	// (see Cluster.MarkCached): WHO shows it as such, and it leads nothing.
	// It is not one of recordFields.
	Cached bool
}

// fields are the record's values in recordFields order.
func (r Record) fields() []string {
	return []string{string(r.Claim.mode()), strconv.Itoa(r.Claim.limit()), strconv.Itoa(r.Claim.Slot),
		strconv.FormatInt(r.Fence, 10), r.Who.Agent, strconv.Itoa(r.Who.PID), strconv.Itoa(r.Who.UID), r.Who.Owner,
		strconv.FormatInt(r.Who.SinceMilli, 10), r.Who.Value}
}

// recordOf reads a record from its fields in recordFields order. A field
// only some kinds use is written only by them (see scripts/lua/record.lua): a
// missing mode is Exclusive, a missing limit 1.
func recordOf(f []string) Record {
	num := func(i int) int64 { n, _ := strconv.ParseInt(f[i], 10, 64); return n }
	claim := Claim{Mode: Mode(f[0]), Limit: int(num(1)), Slot: int(num(2))}
	claim.Mode, claim.Limit = claim.mode(), claim.limit()
	return Record{Claim: claim, Fence: num(3),
		Who: Who{Agent: f[4], PID: int(num(5)), UID: int(num(6)), Owner: f[7], SinceMilli: num(8), Value: f[9]}}
}

// Holder is one current holder of a name as recorded in the masters, with
// the highest fence any of them recorded.
type Holder struct {
	ID     string
	Record Record
}

// Who returns the holders of name that the masters' answers do not rule
// out as held by a majority (see rules.ReadQuorum), with the fence that many of
// those that record it record, and the value most of them
// record (a SET that a paused master missed leaves it the old one until
// it answers again).
func (c *Cluster) Who(ctx context.Context, name string) ([]Holder, error) {
	read, err := c.readHolders(ctx, name, false, nil)
	if err != nil {
		return nil, err
	}
	var out []Holder
	need := rules.ReadQuorum(c.quorum, len(c.masters)-len(read.answers))
	for _, v := range read.votes {
		if v.count >= need {
			fence := v.majorityFence(need)
			r := v.recordAt(fence)
			r.Fence, r.Who.Value, r.Cached = fence, v.value(), v.isCached()
			out = append(out, Holder{ID: v.id, Record: r})
		}
	}
	return out, nil
}

// holderVotes is what the masters of a who round recorded of one holder.
type holderVotes struct {
	id    string
	first Record // as the first master to answer recorded it
	// byFence is each fence's record as the first master to answer with
	// that fence recorded it: a retag that missed a master leaves it the
	// old holder's who beside the old fence.
	byFence map[int64]Record
	count   int // how many masters record it
	fences  map[int64]int
	values  map[string]int
	// settled is the highest fence a master's record marks settled (see
	// scripts/lua/raise_fence.lua) while it still carries it: the term's fence, final.
	// 0 if none does.
	settled int64
	// awaiting is how many masters record it awaiting its agent's word
	// that the grant stood (see awaitingAgent).
	awaiting int
	cached   int // how many masters record it cached
}

// note counts one master's record of the holder.
func (v *holderVotes) note(rec Record) {
	v.count++
	v.fences[rec.Fence]++
	if _, ok := v.byFence[rec.Fence]; !ok {
		v.byFence[rec.Fence] = rec
	}
	v.values[rec.Who.Value]++
}

// recordAt is the record of a master that records fence, else the first
// answer's: a holder's who is shown with the fence it was written with,
// not beside another's (a WHO that read first a master a retag missed
// showed the new fence with the previous holder's who).
func (v *holderVotes) recordAt(fence int64) Record {
	if r, ok := v.byFence[fence]; ok {
		return r
	}
	return v.first
}

// majorityFence is the highest fence that at least quorum of the masters
// recording the holder record (or one above): the grant's fence once it
// was answered, since a grant answers only when a majority records it. A
// master that ran the grant late, after it was decided, records its own
// higher fence, which is no term (the election helper's WHO showed such a
// fence for 100ms).
func (v *holderVotes) majorityFence(quorum int) int64 {
	var fences []int64
	for f, n := range v.fences {
		for range n {
			fences = append(fences, f)
		}
	}
	return rules.OnMajority(fences, quorum)
}

// isCached says most masters that record the holder record it cached (see
// Cluster.MarkCached; a mark that has not landed everywhere yet counts
// where it did).
func (v *holderVotes) isCached() bool { return 2*v.cached > v.count }

// value is the value most masters record (the first's on a tie).
func (v *holderVotes) value() string {
	best := v.first.Who.Value
	for val, n := range v.values {
		if n > v.values[best] {
			best = val
		}
	}
	return best
}

// holdersRead is what a who round read: every holder any master
// records, in the order first seen, and each answering master's view.
type holdersRead struct {
	votes   []*holderVotes
	answers []masterView
}

// masterView is one master's answer to a who round: the holders it
// records, and (for Leader) the fence it would give the next grant.
type masterView struct {
	holders map[string]bool
	next    int64
}

// readHolders runs a who round on name (with next, scripts/lua/leader.lua's: each
// master's next fence too). It reads every answer that comes in time,
// unless enough (if not nil) says that the answers so far decide what the
// caller wants.
func (c *Cluster) readHolders(ctx context.Context, name string, next bool, enough func(holdersRead) bool) (holdersRead, error) {
	var read holdersRead
	byID := map[string]*holderVotes{}
	spec := roundSpec{op: OpWho, script: scripts.Who, keys: []string{c.keys.Set(name)}, args: []string{c.keys.HolderPrefix(name)}, whole: true}
	if next {
		spec.script, spec.keys = scripts.Leader, append(spec.keys, c.keys.Fence(name), c.keys.Marker())
	}
	spec.judge = func(a answer) (int, bool, error) {
		vals, err := a.res.ToArray()
		if err != nil {
			return 0, false, err
		}
		view := masterView{holders: map[string]bool{}}
		if next && len(vals) > 0 {
			s, _ := vals[0].ToString()
			view.next, _ = strconv.ParseInt(s, 10, 64)
			vals = vals[1:]
		}
		width := 3 + len(recordFields) // the holder, its record, its settled mark, its cached mark
		for j := 0; j+width <= len(vals); j += width {
			id, _ := vals[j].ToString()
			f := make([]string, len(recordFields)+1)
			for k := range f {
				f[k], _ = vals[j+1+k].ToString()
			}
			rec := recordOf(f)
			v := byID[id]
			if v == nil {
				v = &holderVotes{id: id, first: rec, byFence: map[int64]Record{}, fences: map[int64]int{}, values: map[string]int{}}
				byID[id] = v
				read.votes = append(read.votes, v)
			}
			v.note(rec)
			switch settled, _ := strconv.ParseInt(f[len(recordFields)], 10, 64); {
			case settled != 0 && settled == rec.Fence:
				v.settled = max(v.settled, settled)
			case f[len(recordFields)] == awaitingAgent:
				v.awaiting++
			}
			if mark, _ := vals[j+width-1].ToString(); mark == "1" {
				v.cached++
			}
			view.holders[id] = true
		}
		read.answers = append(read.answers, view)
		return 0, true, nil
	}
	if enough != nil {
		spec.enough = func() bool { return enough(read) }
	}
	r, never := c.vote(ctx, spec)
	if err := c.majorityErr(r, never); err != nil {
		return read, err
	}
	return read, nil
}

// Retag makes holder's record of name on every master that has it carry r's
// fence, who-info and value: the hold was passed to another local holder, and WHO
// and CHECK should name it. Like a release it goes to every connected master and
// lands in the background on those that answer late (see roundSpec.land): it
// returns once a majority has it (or once the round no longer waits for its
// silent masters: see Patience), so that a
// paused master does not hold up the next retag, which its connection then
// delivers after this one. It says on how many masters it landed by then. A
// master that missed it keeps the earlier holder's fence and who-info until a
// renewal re-creates the record.
func (c *Cluster) Retag(ctx context.Context, name, holder string, r Record) int {
	if c.closed() {
		return 0
	}
	f := r.fields() // recordFields order: fence is 3, who-info and value 4..9
	keys, args := []string{c.keys.Holder(name, holder), c.keys.Observed(name)}, append(append([]string{f[3]}, f[4:]...), c.keys.Channel(name))
	res, _ := c.vote(ctx, roundSpec{op: OpSet, script: scripts.Retag, keys: keys, args: args, land: true,
		judge: func(a answer) (int, bool, error) {
			v, err := a.res.AsInt64()
			return 0, err == nil && v == 1, err
		}})
	return res.yes()
}
