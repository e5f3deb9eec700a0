package protocol

// The kinds of the pushes that are typed here: each push's one format.
const (
	PushLost   = "LOST"
	PushWanted = "WANTED"
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
	l := Push(PushLost).Word(p.Name).Str("owner", p.Owner).Int("fence", p.Fence).Str("reason", p.Reason)
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
	return Push(PushWanted).Word(p.Name).Str("owner", p.Owner).Int("waiting", int64(p.Waiting)).Bytes()
}
