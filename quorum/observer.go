package quorum

import "time"

// Op names an operation on one master, for an Observer.
type Op int

// The operations an Observer times on each master.
const (
	OpAcquire Op = iota // an acquire round's script
	OpRenew             // a watchdog batch: one pipelined round trip
	OpExtend
	OpRelease
	OpWho
	OpDowngrade // an exclusive hold made shared
	OpEnqueue   // a queue entry given its ticket, or the ticket settled
	OpDequeue   // queue entries removed
	NumOps      // how many Ops there are
)

var opNames = [NumOps]string{"acquire", "renew", "extend", "release", "who", "downgrade", "enqueue", "dequeue"}

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
