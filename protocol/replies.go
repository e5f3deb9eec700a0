package protocol

import (
	"strconv"
	"strings"
	"time"
)

// A Message is one line the agent sends: a final reply, a DATA line before
// one, or a push. Each type below is one line of docs/protocol.md, and its
// Bytes is the only place that line is formatted.
type Message interface {
	// Bytes formats the line, with its LF.
	Bytes() []byte
}

// Done is the bare final reply "TAG OK" (PING, QUIT, SET, CANCEL, OBSERVE,
// UNOBSERVE).
type Done struct{ Tag string }

// Bytes formats the line, with its LF.
func (r Done) Bytes() []byte { return reply(r.Tag, KindOK).Bytes() }

// Busy is "TAG BUSY": a LOCK not granted within its wait=.
type Busy struct{ Tag string }

// Bytes formats the line, with its LF.
func (r Busy) Bytes() []byte { return reply(r.Tag, KindBusy).Bytes() }

// Failed is "TAG ERR CODE text", the code of Err (see CodeOf). The text is
// Err's message with line breaks made spaces, and is left out when empty.
type Failed struct {
	Tag string
	Err error
}

// Bytes formats the line, with its LF.
func (r Failed) Bytes() []byte {
	msg := strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, message(r.Err))
	l := reply(r.Tag, KindErr).Word(string(CodeOf(r.Err)))
	if msg != "" {
		l.Word(msg)
	}
	return l.Bytes()
}

// Welcome is HELLO's "TAG OK proto=1 agent=VERSION session=ID masters=N
// quorum=Q"; proto= is always Version.
type Welcome struct {
	Tag, Agent      string
	Session         uint64
	Masters, Quorum int
}

// Bytes formats the line, with its LF.
func (r Welcome) Bytes() []byte {
	return reply(r.Tag, KindOK).Int("proto", Version).Str("agent", r.Agent).Int("session", int64(r.Session)).
		Int("masters", int64(r.Masters)).Int("quorum", int64(r.Quorum)).Bytes()
}

// Granted is a LOCK's grant of one name, "TAG OK fence=F validity=MS
// count=C", then slot=S when its Limit is above 1.
type Granted struct {
	Tag                string
	Fence              int64
	Validity           time.Duration
	Count, Limit, Slot int
}

// Bytes formats the line, with its LF.
func (r Granted) Bytes() []byte {
	l := reply(r.Tag, KindOK).Int("fence", r.Fence).Int("validity", r.Validity.Milliseconds()).Int("count", int64(r.Count))
	if r.Limit > 1 {
		l.Int("slot", int64(r.Slot))
	}
	return l.Bytes()
}

// GrantedAll is a multi-lock's grant, "TAG OK fence=F1,F2 validity=MS
// count=C1,C2", then slot=S1,S2 when Limit is above 1: fences, counts and
// slots in the order the names were given, and the smallest validity.
type GrantedAll struct {
	Tag           string
	Fences        []int64
	Validity      time.Duration
	Counts, Slots []int
	Limit         int
}

// Bytes formats the line, with its LF.
func (r GrantedAll) Bytes() []byte {
	fences := make([]string, len(r.Fences))
	for i, f := range r.Fences {
		fences[i] = strconv.FormatInt(f, 10)
	}
	l := reply(r.Tag, KindOK).Str("fence", strings.Join(fences, ",")).Int("validity", r.Validity.Milliseconds()).
		Str("count", joinInts(r.Counts))
	if r.Limit > 1 {
		l.Str("slot", joinInts(r.Slots))
	}
	return l.Bytes()
}

// Released is UNLOCK's "TAG OK count=C1,C2": what is left of each name's
// hold, in the order the names were given.
type Released struct {
	Tag    string
	Counts []int
}

// Bytes formats the line, with its LF.
func (r Released) Bytes() []byte {
	return reply(r.Tag, KindOK).Str("count", joinInts(r.Counts)).Bytes()
}

// Extended is EXTEND's "TAG OK validity=MS".
type Extended struct {
	Tag      string
	Validity time.Duration
}

// Bytes formats the line, with its LF.
func (r Extended) Bytes() []byte {
	return reply(r.Tag, KindOK).Int("validity", r.Validity.Milliseconds()).Bytes()
}

// Counted is "TAG OK n=N": HOLDS's final reply after its N DATA lines, and
// REVOKE's, N the holds it revoked.
type Counted struct {
	Tag string
	N   int
}

// Bytes formats the line, with its LF.
func (r Counted) Bytes() []byte { return reply(r.Tag, KindOK).Int("n", int64(r.N)).Bytes() }

// Checked is CHECK's "TAG OK current=true|false".
type Checked struct {
	Tag     string
	Current bool
}

// Bytes formats the line, with its LF.
func (r Checked) Bytes() []byte {
	return reply(r.Tag, KindOK).Str("current", strconv.FormatBool(r.Current)).Bytes()
}

// HoldInfo is HOLDS's "TAG DATA name=N owner=O fence=F count=C mode=M
// validity=MS", then limit=K slot=S when Limit is above 1.
type HoldInfo struct {
	Tag, Name, Owner, Mode string
	Fence                  int64
	Count, Limit, Slot     int
	Validity               time.Duration
}

// Bytes formats the line, with its LF.
func (r HoldInfo) Bytes() []byte {
	l := reply(r.Tag, KindData).Str("name", r.Name).Str("owner", r.Owner).Int("fence", r.Fence).
		Int("count", int64(r.Count)).Str("mode", r.Mode).Int("validity", r.Validity.Milliseconds())
	if r.Limit > 1 {
		l.Int("limit", int64(r.Limit)).Int("slot", int64(r.Slot))
	}
	return l.Bytes()
}

// Holder is WHO's "TAG DATA agent=ID pid=P uid=U owner=O mode=M fence=F
// since=UNIXMS", then limit=K slot=S when Limit is above 1, then value=V
// when Value is not empty.
type Holder struct {
	Tag, Agent, Owner, Mode, Value string
	PID, UID                       int
	Fence, Since                   int64
	Limit, Slot                    int
}

// Bytes formats the line, with its LF.
func (r Holder) Bytes() []byte {
	l := reply(r.Tag, KindData).Str("agent", r.Agent).Int("pid", int64(r.PID)).Int("uid", int64(r.UID)).
		Str("owner", r.Owner).Str("mode", r.Mode).Int("fence", r.Fence).Int("since", r.Since)
	if r.Limit > 1 {
		l.Int("limit", int64(r.Limit)).Int("slot", int64(r.Slot))
	}
	if r.Value != "" {
		l.Str("value", r.Value)
	}
	return l.Bytes()
}

// Delayed is WHO's "TAG DATA delayed_until=UNIXMS" while a hold's delay
// keeps the name unavailable.
type Delayed struct {
	Tag   string
	Until int64
}

// Bytes formats the line, with its LF.
func (r Delayed) Bytes() []byte { return reply(r.Tag, KindData).Int("delayed_until", r.Until).Bytes() }

// Waiting is WHO's "TAG DATA waiting agent=ID count=N since=UNIXMS": one
// agent's record of its requests waiting for the name.
type Waiting struct {
	Tag, Agent string
	Count      int
	Since      int64
}

// Bytes formats the line, with its LF.
func (r Waiting) Bytes() []byte {
	return reply(r.Tag, KindData).Word("waiting").Str("agent", r.Agent).Int("count", int64(r.Count)).Int("since", r.Since).Bytes()
}

// Who is WHO's final reply "TAG OK n=K [cached=IDS] [waiting=W]
// [queued=Q]": cached= when Cached is not empty, waiting= when WaitingKnown
// (a majority answered, even with 0), queued= when Queued is above 0.
type Who struct {
	Tag          string
	N            int
	Cached       []string
	Waiting      int
	WaitingKnown bool
	Queued       int
}

// Bytes formats the line, with its LF.
func (r Who) Bytes() []byte {
	l := reply(r.Tag, KindOK).Int("n", int64(r.N))
	if len(r.Cached) > 0 {
		l.Str("cached", strings.Join(r.Cached, ","))
	}
	if r.WaitingKnown {
		l.Int("waiting", int64(r.Waiting))
	}
	if r.Queued > 0 {
		l.Int("queued", int64(r.Queued))
	}
	return l.Bytes()
}

// Master is STATUS's "TAG DATA master=N address=A state=S", then
// quarantine_left=MS when HasQuarantineLeft, reason=WORD whenever State is
// not up (even empty), data=D when Data is not empty, settings=S when
// Settings is not empty, and one shard=V per Shards, last: a client that
// does not know shard= skips it.
type Master struct {
	Tag, Name, Address, State string
	QuarantineLeft            time.Duration
	HasQuarantineLeft         bool
	Reason, Data, Settings    string
	Shards                    []string
}

// Bytes formats the line, with its LF.
func (r Master) Bytes() []byte {
	l := reply(r.Tag, KindData).Str("master", r.Name).Str("address", r.Address).Str("state", r.State)
	if r.HasQuarantineLeft {
		l.Int("quarantine_left", r.QuarantineLeft.Milliseconds())
	}
	if r.State != "up" {
		l.Str("reason", r.Reason)
	}
	if r.Data != "" {
		l.Str("data", r.Data)
	}
	if r.Settings != "" {
		l.Str("settings", r.Settings)
	}
	for _, s := range r.Shards {
		l.Str("shard", s)
	}
	return l.Bytes()
}

// Status is STATUS's final reply "TAG OK agent=VERSION id=ID sessions=N
// holds=N waiters=N quorum=Q tolerates=T lock_delay=MS settings=S", then
// settings_differ=NAMES when SettingsDiffer is not nil (even empty).
type Status struct {
	Tag, Agent, ID, Settings                    string
	Sessions, Holds, Waiters, Quorum, Tolerates int
	LockDelay                                   time.Duration
	SettingsDiffer                              []string
}

// Bytes formats the line, with its LF.
func (r Status) Bytes() []byte {
	l := reply(r.Tag, KindOK).Str("agent", r.Agent).Str("id", r.ID).Int("sessions", int64(r.Sessions)).
		Int("holds", int64(r.Holds)).Int("waiters", int64(r.Waiters)).Int("quorum", int64(r.Quorum)).
		Int("tolerates", int64(r.Tolerates)).Int("lock_delay", r.LockDelay.Milliseconds()).Str("settings", r.Settings)
	if r.SettingsDiffer != nil {
		l.Str("settings_differ", strings.Join(r.SettingsDiffer, ","))
	}
	return l.Bytes()
}

func joinInts(ns []int) string {
	words := make([]string, len(ns))
	for i, n := range ns {
		words[i] = strconv.Itoa(n)
	}
	return strings.Join(words, ",")
}
