package model

import (
	"testing"
	"time"
)

func agents(n, clients int) []Agent {
	var out []Agent
	for range n {
		out = append(out, Agent{Clients: clients, Lease: 300 * time.Millisecond, Quarantine: 400 * time.Millisecond, DriftFactor: 0.01})
	}
	return out
}

func TestProbe(t *testing.T) {
	for d := 4; d <= 16; d++ {
		res, err := Check(World{Agents: agents(2, 1), Attempts: 1, Wipes: 1, Depth: d})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("depth %d: %v %s", d, res, res.Violation)
		for _, l := range res.Trace {
			t.Log(l)
		}
		if res.Violation != "" || res.Elapsed > 20*time.Second {
			break
		}
	}
}
