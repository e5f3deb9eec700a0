package telemetry

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/quorum"
	"github.com/prometheus/client_golang/prometheus"
)

// TestShardSeriesFollowTheMastersStatus: a master that is a Redis Cluster
// has a state series per shard and state, and its quarantined slots; a
// standalone master has none; two shards caught with one address do not
// fail the scrape.
func TestShardSeriesFollowTheMastersStatus(t *testing.T) {
	status := []quorum.MasterStatus{
		{Name: "a", Address: "h:1", State: quorum.StateUp},
		{Name: "c", Address: "n1:7000", State: quorum.StateUp, Shards: []quorum.ShardStatus{
			{Address: "n1:7000", Slots: "0-8191", State: quorum.StateUp},
			{Address: "n2:7000", Slots: "8192-16383", State: quorum.StateQuarantined, QuarantinedSlots: 8192, QuarantineLeft: time.Second},
			{Address: "n2:7000", Slots: "", State: quorum.StateDown},
		}},
	}
	c := stateCollector{status: func() []quorum.MasterStatus { return status }, quorum: func() int { return 1 }, sessions: func() int { return 0 }}
	want := []string{
		`lock_agent_shard_quarantined_slots{master="c",shard="n1:7000"} 0`,
		`lock_agent_shard_quarantined_slots{master="c",shard="n2:7000"} 8192`,
	}
	for _, s := range []struct {
		shard string
		in    quorum.State
	}{{"n1:7000", quorum.StateUp}, {"n2:7000", quorum.StateQuarantined}} {
		for _, st := range masterStates {
			v := 0
			if st == s.in {
				v = 1
			}
			want = append(want, fmt.Sprintf(`lock_agent_shard_state{master="c",shard="%s",state="%s"} %d`, s.shard, st, v))
		}
	}
	got := scrape(t, c, "lock_agent_shard_")
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("shard series:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// scrape gathers collector c as a registry would, and returns its series
// whose names start with prefix, one "name{labels} value" each, sorted.
func scrape(t *testing.T, c prometheus.Collector, prefix string) []string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), prefix) {
			continue
		}
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			out = append(out, fmt.Sprintf("%s{%s} %v", f.GetName(), strings.Join(labels, ","), m.GetGauge().GetValue()))
		}
	}
	slices.Sort(out)
	return out
}
