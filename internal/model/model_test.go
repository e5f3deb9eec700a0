package model

import (
	"flag"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/agent"
)

// depthFlag (or LOCK_AGENT_MODEL_DEPTH) runs the protected worlds deeper
// than CI does: go test ./internal/model -run TestModel -model.depth 9.
var depthFlag = flag.Int("model.depth", 0, "depth of the protected worlds (0: the CI depths, or LOCK_AGENT_MODEL_DEPTH)")

// ciDepth is the depth CI explores the protected world to, and
// ciSideDepth the semaphore and cohort worlds (whose states branch more):
// the package's tests in about 20 s on a loaded 2-core machine (CI runs
// them without -race: one goroutine, nothing for it to find; scripts/test).
const (
	ciDepth     = 5
	ciSideDepth = 4
)

// depth is the depth to explore the protected world to.
func depth(t *testing.T) int { return depthOr(t, ciDepth) }

// depthOr is the depth that -model.depth or LOCK_AGENT_MODEL_DEPTH asks
// for, else ci.
func depthOr(t *testing.T, ci int) int {
	if *depthFlag > 0 {
		return *depthFlag
	}
	if v := os.Getenv("LOCK_AGENT_MODEL_DEPTH"); v != "" {
		d, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("LOCK_AGENT_MODEL_DEPTH=%q: %v", v, err)
		}
		return d
	}
	return ci
}

// newAgent is an agent with clients clients and a lease, as the agent
// configures it: drift factor 0.01 (so the drift allowance is lease/100 +
// 2 ms), master timeout 50 ms, the quarantine agent.Quarantine makes of
// them (lease + lease×drift + 2×master timeout + 10 ms) and the settings
// agent.ClusterSettings records.
func newAgent(clients int, lease time.Duration) Agent {
	l := agent.LockConfig{Lease: lease, DriftFactor: 0.01, MasterTimeout: 50 * time.Millisecond}
	return Agent{Clients: clients, Lease: lease, Quarantine: agent.Quarantine(l), DriftFactor: l.DriftFactor, Settings: agent.ClusterSettings(l)}
}

// shortened is a with a quarantine shorter than agent.Quarantine gives
// (its settings left as they were): a protection switched off.
func shortened(a Agent, quarantine time.Duration) Agent {
	a.Quarantine = quarantine
	return a
}

const (
	lease = 300 * time.Millisecond // quarantine 413 ms
	// longLease is another agent's lease (quarantine 716 ms).
	longLease = 600 * time.Millisecond
)

// protected is the world CI checks: every protection on, settings every
// agent shares, one master that may lose its data, one agent that may
// crash, answers that may be lost.
func protected(d int) World {
	return World{Agents: []Agent{newAgent(2, lease), newAgent(1, lease)},
		Attempts: 1, Wipes: 1, Crashes: 1, Lossy: true, Depth: d}
}

func TestModelHoldsItsInvariants(t *testing.T) {
	res, err := Check(protected(depth(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("protected world: %v", res)
	if res.Violation != "" {
		t.Fatalf("counterexample: %s\n%s", res.Violation, strings.Join(res.Trace, "\n"))
	}
	if res.Depth < depth(t) {
		t.Fatalf("the search ended at depth %d before %d: the world ran out of events", res.Depth, depth(t))
	}
}

// TestModelFindsTheCounterexampleWithAProtectionOff switches each
// protection off in turn and asserts that the checker finds a run that
// breaks an invariant, and prints it; then checks the same world with the
// protection on to the same depth and finds none. The protections every
// acquire has are switched off under each acquire script: the lean one
// (a plain lock's) and the general one (the same lock with a value);
// those of the lean script's own shortcuts under it alone.
func TestModelFindsTheCounterexampleWithAProtectionOff(t *testing.T) {
	twoAgents := func(a0, a1 Agent) World {
		return World{Agents: []Agent{a0, a1}, Attempts: 1, Wipes: 1, Depth: 7}
	}
	safe := newAgent(1, lease)
	type protection struct {
		name     string
		off, on  World
		protects string
	}
	cases := []protection{{
		name:     "the epoch gate off: a master that lost its data votes at once",
		off:      patched(twoAgents(safe, safe), GateOff),
		on:       twoAgents(safe, safe),
		protects: "believe",
	}, {
		name:     "the fence floor off: a master that lost its counter restarts it within the same second",
		off:      patched(twoAgents(safe, safe), FenceFloorOff),
		on:       twoAgents(safe, safe),
		protects: "fence",
	}, {
		name:     "the quarantine shorter than a lease: an emptied master votes while a hold it forgot is valid",
		off:      twoAgents(shortened(safe, 100*time.Millisecond), shortened(safe, 100*time.Millisecond)),
		on:       twoAgents(safe, safe),
		protects: "believe",
	}, {
		name:     "the settings check off: an agent with a short lease plants a quarantine shorter than another agent's lease",
		off:      patched(twoAgents(newAgent(1, longLease), safe), SettingsCheckOff),
		on:       twoAgents(newAgent(1, longLease), safe),
		protects: "believe",
	}}
	var all []protection
	for _, tc := range cases {
		lean, general := tc, tc
		lean.name = "lean script: " + tc.name
		general.name = "general script: " + tc.name
		general.off.Values, general.on.Values = true, true
		all = append(all, lean, general)
	}
	all = append(all, protection{
		name:     "lean script: its fresh-name shortcut taken with holders there",
		off:      patched(twoAgents(safe, safe), LeanHoldersOff),
		on:       twoAgents(safe, safe),
		protects: "believe",
	}, protection{
		name:     "lean script: its shortcut takes a fence counter that is there as missing",
		off:      patched(twoAgents(safe, safe), LeanCounterOff),
		on:       twoAgents(safe, safe),
		protects: "fence",
	})
	for _, tc := range all {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Check(tc.off)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("protection off: %v", res)
			if res.Violation == "" {
				t.Fatalf("no counterexample found with the protection off")
			}
			t.Logf("counterexample: %s\n%s", res.Violation, strings.Join(res.Trace, "\n"))
			if !strings.Contains(res.Violation, tc.protects) {
				t.Errorf("the counterexample breaks another invariant than the one the protection keeps (%q)", tc.protects)
			}
			on := tc.on
			on.Depth = res.Depth
			res, err = Check(on)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("protection on, to the same depth: %v", res)
			if res.Violation != "" {
				t.Fatalf("counterexample with the protection on: %s\n%s", res.Violation, strings.Join(res.Trace, "\n"))
			}
		})
	}
}

func patched(w World, patch func(string) string) World {
	w.Patch = patch
	return w
}

// semaphore is the world of a semaphore of two slots and three clients.
func semaphore(d int) World {
	return World{Agents: []Agent{newAgent(2, lease), newAgent(1, lease)},
		Limit: 2, Attempts: 1, Wipes: 1, Depth: d}
}

// TestModelSemaphore checks a semaphore of two slots: with the epoch gate
// off the checker finds two holders on one slot; with it on, to the CI
// depth (or -model.depth), never more than two holders nor two on one slot.
func TestModelSemaphore(t *testing.T) {
	off := semaphore(6)
	off.Patch = GateOff
	res, err := Check(off)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("epoch gate off: %v", res)
	if res.Violation == "" {
		t.Fatalf("no counterexample found with the epoch gate off")
	}
	t.Logf("counterexample: %s\n%s", res.Violation, strings.Join(res.Trace, "\n"))
	res, err = Check(semaphore(max(res.Depth, depthOr(t, ciSideDepth))))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("protected: %v", res)
	if res.Violation != "" {
		t.Fatalf("counterexample: %s\n%s", res.Violation, strings.Join(res.Trace, "\n"))
	}
}

// TestModelDriftAllowance makes a master's clock jump ahead, so that its
// keys expire early: by more than a hold's drift allowance (lease/100 + 2
// ms: 5 ms) the checker finds two holders; by the allowance, none. It is
// what Validity's drift term is for.
func TestModelDriftAllowance(t *testing.T) {
	safe := newAgent(1, lease)
	world := func(skew time.Duration, d int) World {
		return World{Agents: []Agent{safe, safe}, Attempts: 1, Skews: 1, Skew: skew, Depth: d}
	}
	res, err := Check(world(10*time.Millisecond, 6))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("a clock 10 ms ahead: %v", res)
	if res.Violation == "" {
		t.Fatalf("no counterexample found with a clock ahead by more than the drift allowance")
	}
	t.Logf("counterexample: %s\n%s", res.Violation, strings.Join(res.Trace, "\n"))
	res, err = Check(world(5*time.Millisecond, max(res.Depth, depth(t))))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("a clock 5 ms ahead: %v", res)
	if res.Violation != "" {
		t.Fatalf("counterexample within the drift allowance: %s\n%s", res.Violation, strings.Join(res.Trace, "\n"))
	}
}

func TestAPatchThatNoLongerMatchesFailsLoudly(t *testing.T) {
	cases := []struct {
		name  string
		patch func(string) string
		src   string
	}{
		{"the gate off, on a gate with another signature", GateOff, "local function gate(marker, epoch)\nreturn 0\nend\n"},
		{"the settings check off, on a gate with another signature", SettingsCheckOff, "local function gate(marker, epoch)\nreturn 0\nend\n"},
		{"the settings check off, on a gate that checks no settings", SettingsCheckOff, "local function gate(marker, epocharg, gatearg)\n  return 0, 0\nend\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("a script whose gate changed was left as it was")
				}
			}()
			tc.patch(tc.src)
		})
	}
}

// cohort is the world of lock cohorting: a0's two clients pass the name
// between them with the fences of a block of three, a1 asks too.
func cohort(d int) World {
	return World{Agents: []Agent{newAgent(2, lease), newAgent(1, lease)},
		Block: 3, Attempts: 1, Wipes: 1, Depth: d}
}

// TestModelCohort checks hand-overs inside an agent: with the masters'
// block reservation off, the checker finds a grant whose fence is not above
// a fence handed on; with it on, to the CI depth (4), none.
func TestModelCohort(t *testing.T) {
	off := cohort(7)
	off.Patch = BlockReservationOff
	res, err := Check(off)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("block reservation off: %v", res)
	if res.Violation == "" {
		t.Fatalf("no counterexample found with the block reservation off")
	}
	t.Logf("counterexample: %s\n%s", res.Violation, strings.Join(res.Trace, "\n"))
	res, err = Check(cohort(max(res.Depth, depthOr(t, ciSideDepth))))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("protected: %v", res)
	if res.Violation != "" {
		t.Fatalf("counterexample: %s\n%s", res.Violation, strings.Join(res.Trace, "\n"))
	}
}
