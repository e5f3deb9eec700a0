package agent

import (
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/protocol"
	"github.com/lock-agent/lock-agent/quorum"
	"github.com/lock-agent/lock-agent/renewal"
)

// TestMetricsRecordWithoutAllocating: what the request path records is an
// atomic add on a series made up front, never a lookup that allocates.
func TestMetricsRecordWithoutAllocating(t *testing.T) {
	m := newMetrics([]quorum.MasterConfig{{Name: "a"}, {Name: "b"}, {Name: "c"}})
	w := &waiter{req: protocol.Lock{Names: []string{"x"}, Mode: protocol.Exclusive}, joined: time.Now()}
	h := &hold{mode: protocol.Shared, granted: time.Now()}
	noQuorum := protocol.Errorf(protocol.ErrNoQuorum, "no quorum")
	for _, tc := range []struct {
		name   string
		record func()
	}{
		{"a grant", func() { m.lockAnswered(w, result{count: 1}) }},
		{"a BUSY", func() { m.lockAnswered(w, result{err: quorum.ErrBusy}) }},
		{"a NO_QUORUM", func() { m.lockAnswered(w, result{err: noQuorum}) }},
		{"a hold that starts and ends", func() { m.holdStarted(h); m.holdEnded(h) }},
		{"a waiter that comes and goes", func() { m.mode(w.req.Mode).waiters.Inc(); m.mode(w.req.Mode).waiters.Dec() }},
		{"a loss", func() { m.lost(renewal.ReasonQuorum) }},
		{"an EXTEND without quorum", func() { m.noQuorumAnswered("extend") }},
		{"a master's answer", func() { m.MasterOp(2, quorum.OpAcquire, time.Millisecond) }},
		{"a fence write-back", func() { m.FenceWriteBack(1, true) }},
	} {
		if n := testing.AllocsPerRun(100, tc.record); n != 0 {
			t.Errorf("recording %s allocates %v times", tc.name, n)
		}
	}
}
