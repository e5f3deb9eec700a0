package model

import (
	"fmt"
	"strings"
	"time"

	"github.com/lock-agent/lock-agent/quorum"
)

// name is the one name the world's clients ask for; markerKey is the
// masters' epoch marker under the model's key prefix.
const (
	name      = "n"
	markerKey = "m:epoch"
)

// Agent is one agent's settings.
type Agent struct {
	Clients     int           // local clients that ask for the name
	Lease       time.Duration // the lease of its holds (the watchdog's)
	Quarantine  time.Duration // what its gate calls give a master found empty
	DriftFactor float64
	// Settings are what its markers record and its gate calls must find
	// recorded (see quorum.Settings; agent.ClusterSettings makes them from
	// a lock config). Agent 0's are what the masters are bootstrapped with.
	// Nil: none.
	Settings quorum.Settings
}

// World is the small world the checker explores.
type World struct {
	Agents []Agent
	// Limit is what the clients ask for: a lock (0 or 1) or a semaphore of
	// Limit slots.
	Limit int
	// Block, for a lock, is how many fences a grant reserves (0 or 1: one),
	// which its agent hands to its other clients in turn without asking
	// the masters (lock cohorting: see agent/locks/cohort.go).
	Block int
	// Values makes the clients attach a value to their holds. A plain lock
	// (Limit and Block at most 1) is otherwise a lean request, which the
	// masters serve with the lean acquire script (quorum/scripts/lua/acquire_lean.lua);
	// a value makes it one for the general script (acquire.lua), as a
	// semaphore and a block are.
	Values bool
	// Attempts bounds each client's acquire attempts.
	Attempts int
	// Wipes bounds the master restarts (empty) and FLUSHALLs in a run;
	// Crashes the agent crashes.
	Wipes, Crashes int
	// Skews bounds the jumps of a master's clock ahead of the others, each
	// by Skew: its TIME, and when its keys expire. A jump stands for the
	// drift a master's clock gathers over a lease.
	Skews int
	Skew  time.Duration
	// Lossy lets a round's answer be lost after its script ran (the master
	// changed, the agent never hears). A request lost on its way needs no
	// switch: it is a message never delivered.
	Lossy bool
	// Depth bounds the events of a run.
	Depth int
	// Patch, if set, rewrites each script's source before it runs: how a
	// test switches a protection off (see GateOff, FenceFloorOff).
	Patch func(src string) string
}

// agentModel is one agent as the model runs it: its settings and the
// Cluster whose functions build its script calls (never connected).
type agentModel struct {
	Agent
	cluster *quorum.Cluster
	limit   int // the world's Limit
	block   int // the world's Block (at least 1)
	value   string
	index   int // in World.Agents
	first   int // index of its first client in state.clients
}

func newAgents(w World) ([]agentModel, error) {
	if w.Block > 1 && w.Limit > 1 {
		return nil, fmt.Errorf("model: fence blocks are for locks, not a semaphore of %d", w.Limit)
	}
	if w.Limit > masters {
		return nil, fmt.Errorf("model: a semaphore of %d slots: at most %d, so that a slot fits the state's encoding", w.Limit, masters)
	}
	var out []agentModel
	first := 0
	for i, a := range w.Agents {
		var ms []quorum.MasterConfig
		for m := range masters {
			ms = append(ms, quorum.MasterConfig{Name: fmt.Sprintf("m%d", m+1), Address: "model"})
		}
		c, err := quorum.New(quorum.Config{Masters: ms, KeyPrefix: "m:", DriftFactor: a.DriftFactor,
			Quarantine: a.Quarantine, Settings: a.Settings, InstanceID: fmt.Sprintf("a%d", i)})
		if err != nil {
			return nil, err
		}
		value := ""
		if w.Values {
			value = fmt.Sprintf("v%d", i)
		}
		out = append(out, agentModel{Agent: a, cluster: c, limit: w.Limit, block: max(w.Block, 1), value: value, index: i, first: first})
		first += a.Clients
	}
	return out, nil
}

// call is the script call that delivers m, built as the sending agent
// builds it (with the may-plant decision it made when it sent m).
func (a *agentModel) call(m message) quorum.ScriptCall {
	c := a.cluster
	switch m.kind {
	case acquireCall:
		return c.ModelAcquire(m.master, quorum.AcquireRequest{Name: name, Holder: m.holder, Lease: a.Lease, Claim: quorum.Claim{Limit: a.limit}, FenceBlock: a.block,
			Who: a.who(m)}, m.mayPlant)
	case renewCall:
		return c.ModelRenew(m.master, a.Lease, []quorum.RenewKey{{Name: name, Holder: m.holder}}, m.mayPlant)
	case repairCall:
		record := quorum.Record{Claim: quorum.Claim{Limit: a.limit, Slot: m.slot}, Fence: m.fence, Top: m.fence + int64(a.block) - 1, Who: a.who(m)}
		return c.ModelRepair(m.master, a.Lease, quorum.RenewKey{Name: name, Holder: m.holder, Record: record}, m.mayPlant)
	case writeBackCall, raiseCall:
		return c.ModelRaiseFence(m.master, name, m.holder, m.fence, int64(a.block))
	default:
		return c.ModelRelease(m.master, name, m.holder)
	}
}

// who is what the holds of m's client record of it.
func (a *agentModel) who(m message) quorum.Who {
	return quorum.Who{Agent: fmt.Sprintf("a%d", m.agent), PID: m.client, Value: a.value}
}

// gateSignature is the epoch gate's Lua signature (see quorum/scripts/lua/gate.lua),
// which GateOff and SettingsCheckOff patch.
const gateSignature = "gate(marker, epocharg, gatearg)"

// GateOff is a Patch that switches the epoch gate off: every gate call
// answers "may vote, no fence floor", so a master that lost its data votes
// at once, whatever settings it records. The script text is rewritten
// here, in the model only.
func GateOff(src string) string {
	return patchFunction(src, gateSignature, "do return 0, 0 end")
}

// SettingsCheckOff is a Patch that switches the gate's settings check off:
// a marker that records other settings than the agent's votes as if they
// matched (and the probe sees no refusal, so the agent counts it as a
// master it may plant beside). The quarantine and the fence floor stay.
func SettingsCheckOff(src string) string {
	return patchLine(src, gateSignature, "  if recorded ~= settings then\n", "  if false then\n")
}

// fencesSignature is take_fences's Lua signature (see quorum/scripts/lua/fences.lua).
const fencesSignature = "take_fences(key, floor, block, there)"

// FenceFloorOff is a Patch that switches the fence counter's floor off: a
// counter that a master lost starts again from the master's clock in whole
// seconds, but no longer above the floor its epoch marker records.
func FenceFloorOff(src string) string {
	return patchFunction(src, fencesSignature, "floor = 0")
}

// BlockReservationOff is a Patch that switches fence blocks off on the
// masters: a grant that asks for a block of fences takes one, so the
// counter no longer counts past the fences its agent hands on.
func BlockReservationOff(src string) string {
	return patchFunction(src, fencesSignature, "block = 1")
}

// leanFresh is the lean acquire script's test of a fresh name (see
// quorum/scripts/lua/acquire_lean.lua): no holder set, queue or tombstone.
const leanFresh = "if lean_seen < 4 then\n"

// LeanHoldersOff is a Patch that makes the lean acquire script grant a
// name as fresh whatever keys it has: it no longer looks for holders
// (nor a queue, nor a tombstone) before its shortcut. Other scripts are
// left as they were.
func LeanHoldersOff(src string) string {
	return patchLean(src, leanFresh, "if true then\n")
}

// LeanCounterOff is a Patch that makes the lean acquire script's shortcut
// take the fence counter as missing whatever it finds: it no longer reads
// it, and a name's next fence restarts from the master's clock in whole
// seconds (above the floor still).
func LeanCounterOff(src string) string {
	return patchLean(src, "lean_seen % 2 == 1)", "false)")
}

// patchLean replaces old with new in the lean acquire script; other
// scripts are left as they were. It fails loudly, as patchFunction does,
// if the lean script no longer has old.
func patchLean(src, old, new string) string {
	if !strings.Contains(src, "local lean_seen = ") {
		return src
	}
	if !strings.Contains(src, old) {
		panic("model: the lean acquire script changed: no " + strings.TrimSpace(old))
	}
	return strings.Replace(src, old, new, 1)
}

// patchFunction puts first in the body of the Lua function signature, in a
// script that defines it. It fails loudly if the script names the function
// but not with that signature: a patch that silently did nothing would make
// its test pass for nothing.
func patchFunction(src, signature, first string) string {
	head, ok := functionHead(src, signature)
	if !ok {
		return src
	}
	return strings.Replace(src, head, head+"  "+first+"\n", 1)
}

// patchLine replaces the line old of the Lua function signature with new,
// in a script that defines it. It fails loudly, as patchFunction does, if
// the function or the line changed.
func patchLine(src, signature, old, new string) string {
	head, ok := functionHead(src, signature)
	if !ok {
		return src
	}
	body := src[strings.Index(src, head)+len(head):]
	end := strings.Index(body, "\nend\n")
	if end < 0 || !strings.Contains(body[:end+1], old) {
		panic("model: the scripts changed: no line " + strings.TrimSpace(old) + " in " + signature)
	}
	return strings.Replace(src, head+body[:end+1], head+strings.Replace(body[:end+1], old, new, 1), 1)
}

// functionHead is the line that starts the Lua function signature in src,
// and whether src defines a function of that name. It panics if src
// defines it with another signature.
func functionHead(src, signature string) (string, bool) {
	name := signature[:strings.Index(signature, "(")]
	if !strings.Contains(src, "local function "+name+"(") {
		return "", false
	}
	head := "local function " + signature + "\n"
	if !strings.Contains(src, head) {
		panic("model: the scripts changed: no " + head)
	}
	return head, true
}
