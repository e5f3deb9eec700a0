package model

import (
	"fmt"
	"testing"

	"github.com/lock-agent/lock-agent/quorum"
)

// BenchmarkScriptRun measures what a script run the memo does not know
// costs: the master's keyspace loaded into miniredis, the acquire script
// run by EVAL, the keyspace read back.
func BenchmarkScriptRun(b *testing.B) {
	c, err := newChecker(World{Agents: []Agent{newAgent(1, lease)}, Attempts: 1, Depth: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer c.run.close()
	ks := c.initial().masters[0]
	a := &c.agents[0]
	b.ResetTimer()
	for i := range b.N {
		// A new holder each time, so that the memo never answers.
		m := message{master: 0, kind: acquireCall, holder: fmt.Sprintf("h%d", i)}
		c.run.run(ks, 0, m.holder, func() quorum.ScriptCall { return a.call(m) })
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/run")
}

// BenchmarkState measures what a state costs the search besides its
// scripts: a clone and its digest under every order of the masters.
func BenchmarkState(b *testing.B) {
	c, err := newChecker(protected(3))
	if err != nil {
		b.Fatal(err)
	}
	defer c.run.close()
	s := c.initial()
	c.startAcquire(s, 0)
	c.startAcquire(s, 2)
	b.ResetTimer()
	for range b.N {
		s.clone().digest()
	}
}
