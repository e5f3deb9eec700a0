package locks

import (
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/lock-agent/lock-agent/protocol"
	"github.com/lock-agent/lock-agent/quorum/clock"
	"github.com/lock-agent/lock-agent/renewal"
	dto "github.com/prometheus/client_model/go"
)

// countingClient is a session that notes, as each line is queued for its
// client, how many WANTED pushes the metrics had counted by then.
type countingClient struct {
	Client // the methods pushWanted does not call
	m      *Metrics
	seen   []float64
}

func (c *countingClient) PushFor(h *Hold, ok func() bool, line []byte) bool {
	if !ok() {
		return false
	}
	c.Push(line)
	return true
}

func (c *countingClient) Push(line []byte) {
	var counted dto.Metric
	c.m.WantedPushes.Write(&counted)
	c.seen = append(c.seen, counted.GetCounter().GetValue())
}

// TestAWantedPushIsCountedBeforeItIsQueued: a client that reads the
// metrics as soon as it hears WANTED finds that push counted, as it does
// a LOST (see the server's tellLostLocked).
func TestAWantedPushIsCountedBeforeItIsQueued(t *testing.T) {
	m := NewMetrics(nil)
	a := New(Config{Lease: time.Second}, hclog.NewNullLogger(), clock.NewFake(time.Unix(1700000000, 0)), m, "i")
	c := &countingClient{m: m}
	h := &Hold{rh: &renewal.Hold{Name: "jobs/a"}, sess: c, owner: "o", mode: protocol.Exclusive, limit: 1, notifyWanted: true}
	a.names["jobs/a"] = &nameRecord{key: "jobs/a", wanted: &wantedName{holds: []*Hold{h}, others: map[string]heardWant{}}}

	a.pushWanted("jobs/a", wanter{limit: 1})
	if len(c.seen) != 1 {
		t.Fatalf("%d WANTED pushes queued, want 1", len(c.seen))
	}
	if c.seen[0] != 1 {
		t.Fatalf("the push was queued with %v pushes counted, want 1: counted after its client could hear of it", c.seen[0])
	}
}
