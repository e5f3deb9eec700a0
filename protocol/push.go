package protocol

// The kinds of the pushes that are typed here: each push's one format.
const (
	PushLost   = "LOST"
	PushWanted = "WANTED"
	PushLeader = "LEADER"
	PushBye    = "BYE"
)

// Lost is the push "* LOST NAME owner=O fence=F reason=R [why=W]": the
// hold of Name by Owner, granted with Fence, ended without its client
// asking, for Reason (quorum, expired, revoked or shutdown). Why is the
// operator's word of a revocation (REVOKE reason=W), or "": then the line
// has no why=.
type Lost struct {
	Name, Owner string
	Fence       int64
	Reason      string
	Why         string
}

// Bytes formats the push, with its LF.
func (p Lost) Bytes() []byte {
	l := push(PushLost).Word(p.Name).Str("owner", p.Owner).Int("fence", p.Fence).Str("reason", p.Reason)
	if p.Why != "" {
		l.Str("why", p.Why)
	}
	return l.Bytes()
}

// Wanted is the push "* WANTED NAME owner=O waiting=N": the hold of Name
// by Owner, whose LOCK had notify=wanted, is wanted by Waiting requests
// (at least 1) the agent knows to wait for Name.
type Wanted struct {
	Name, Owner string
	Waiting     int
}

// Bytes formats the push, with its LF.
func (p Wanted) Bytes() []byte {
	return push(PushWanted).Word(p.Name).Str("owner", p.Owner).Int("waiting", int64(p.Waiting)).Bytes()
}

// Leader is the push "* LEADER NAME fence=F value=V agent=A" to the
// observers of Name while Held (the leader's term F, its value V, empty
// when none, and its agent's id A), else "* LEADER NAME none".
type Leader struct {
	Name         string
	Held         bool
	Fence        int64
	Value, Agent string
}

// Bytes formats the push, with its LF.
func (p Leader) Bytes() []byte {
	if !p.Held {
		return push(PushLeader).Word(p.Name).Word("none").Bytes()
	}
	return push(PushLeader).Word(p.Name).Int("fence", p.Fence).Str("value", p.Value).Str("agent", p.Agent).Bytes()
}

// Bye is the push "* BYE reason=R", the last line of a connection the
// agent closes: R is shutdown, protocol or idle.
type Bye struct{ Reason string }

// Bytes formats the push, with its LF.
func (p Bye) Bytes() []byte { return push(PushBye).Str("reason", p.Reason).Bytes() }
