package quorum

import (
	"strconv"
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
}

// Record is a hold as the masters keep it: a hash with its own PX lease.
type Record struct {
	Claim Claim
	Fence int64
	// Top is the last fence of the block the grant reserved (see
	// AcquireRequest.FenceBlock): a master that re-creates the record
	// raises its counter to it. It is not one of the hash's fields.
	Top int64
	Who Who
}

// fields are the record's values in recordFields order.
func (r Record) fields() []string {
	return []string{string(r.Claim.mode()), strconv.Itoa(r.Claim.limit()), strconv.Itoa(r.Claim.Slot),
		strconv.FormatInt(r.Fence, 10), r.Who.Agent, strconv.Itoa(r.Who.PID), strconv.Itoa(r.Who.UID), r.Who.Owner,
		strconv.FormatInt(r.Who.SinceMilli, 10)}
}

// recordOf reads a record from its fields in recordFields order.
func recordOf(f []string) Record {
	num := func(i int) int64 { n, _ := strconv.ParseInt(f[i], 10, 64); return n }
	return Record{Claim: Claim{Mode: Mode(f[0]), Limit: int(num(1)), Slot: int(num(2))}, Fence: num(3),
		Who: Who{Agent: f[4], PID: int(num(5)), UID: int(num(6)), Owner: f[7], SinceMilli: num(8)}}
}
