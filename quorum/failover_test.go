package quorum

import (
	"testing"
	"time"
)

func TestFailoverMargin(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     MasterConfig
		gateArg string
		want    string
	}{
		{"a master without replicas to promote keeps the quarantine", MasterConfig{Address: "h:1"}, "1110 1 lease=1s", "1110 1 lease=1s"},
		{"a Sentinel master sits out 1s of lag and the slack more", MasterConfig{Sentinels: []string{"h:2"}, MasterSet: "m"}, "1110 1 lease=1s", "4210 1 lease=1s"},
		{"a master given a replica lag sits out that lag and the slack more", MasterConfig{Address: "h:1", ReplicaLag: 3 * time.Second}, "1110 0 ", "6210 0 "},
		{"a gate argument it cannot read is left as it is", MasterConfig{ReplicaLag: time.Second}, "soon 1 x", "soon 1 x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &master{cfg: tc.cfg}
			if got := m.lengthenQuarantine(tc.gateArg); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestGateArgsLengthenTheQuarantine: the margin reaches the gate argument
// of every script that runs the gate, right after its epoch argument.
func TestGateArgsLengthenTheQuarantine(t *testing.T) {
	m := &master{cfg: MasterConfig{Sentinels: []string{"h:2"}, MasterSet: "m"}}
	args := []string{"holder", "1000", "prefix", "epoch", "1000 1 s"}
	got := m.gateArgs(acquireScript, args)
	if got[3] != "epoch;" || got[4] != "4100 1 s" || args[4] != "1000 1 s" {
		t.Fatalf("got %q from %q", got, args)
	}
}
