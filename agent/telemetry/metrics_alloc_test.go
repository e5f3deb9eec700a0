package telemetry

import (
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/buildinfo"
	"github.com/lock-agent/lock-agent/protocol"
	"github.com/lock-agent/lock-agent/quorum"
	"github.com/lock-agent/lock-agent/renewal"
)

// TestMetricsRecordWithoutAllocating: what the request path records is an
// atomic add on a series made up front, never a lookup that allocates.
func TestMetricsRecordWithoutAllocating(t *testing.T) {
	m := NewMetrics(buildinfo.Info{Version: "test", Commit: "test", GoVersion: "test"}, []quorum.MasterConfig{{Name: "a"}, {Name: "b"}, {Name: "c"}})
	joined, granted := time.Now(), time.Now()
	noQuorum := protocol.Errorf(protocol.ErrNoQuorum, "no quorum")
	for _, tc := range []struct {
		name   string
		record func()
	}{
		{"a grant", func() { m.LockAnswered(protocol.Exclusive, joined, 1, nil) }},
		{"a BUSY", func() { m.LockAnswered(protocol.Exclusive, joined, 0, quorum.ErrBusy) }},
		{"a NO_QUORUM", func() { m.LockAnswered(protocol.Exclusive, joined, 0, noQuorum) }},
		{"a hold that starts and ends", func() { m.HoldStarted(protocol.Shared); m.HoldEnded(protocol.Shared, granted) }},
		{"a waiter that comes and goes", func() { m.Mode(protocol.Exclusive).Waiters.Inc(); m.Mode(protocol.Exclusive).Waiters.Dec() }},
		{"a loss", func() { m.Lost(renewal.ReasonQuorum) }},
		{"an EXTEND without quorum", func() { m.NoQuorumAnswered("extend") }},
		{"a master's answer", func() { m.MasterOp(2, quorum.OpAcquire, time.Millisecond) }},
		{"a fence write-back", func() { m.FenceWriteBack(1, true) }},
	} {
		if n := testing.AllocsPerRun(100, tc.record); n != 0 {
			t.Errorf("recording %s allocates %v times", tc.name, n)
		}
	}
}
