package quorum

import (
	"strconv"
	"time"

	"github.com/lock-agent/lock-agent/quorum/rules"
	"github.com/lock-agent/lock-agent/quorum/scripts"
)

// This file is the narrow surface that the protocol's model checker
// (internal/model) reads: the scripts and the arguments a Cluster sends to
// one master, built by the functions the agent itself uses, so that a change
// to a script or to its arguments reaches the model in one place. Nothing
// here talks to a master; the agent does not call it. The pure rules the
// model decides with (DecideSlots, SettleFence) are quorum/rules', which the
// agent uses too.

// ScriptCall is one script call as a Cluster would send it to one master:
// the Lua source that EVAL runs and its KEYS and ARGV. Src is the variant
// whose gate reads the server's run_id (what a master that restarted runs:
// see scripts.Script.AfterRestart), so the model needs no script cache.
type ScriptCall struct {
	Src        string
	Keys, Args []string
}

// modelCall is s's call on master i with keys and args, its gate's epoch
// argument completed as master i's calls carry it, and, for a script that
// runs the gate, its gate argument (which follows the epoch argument) made
// with mayPlant: the model agent's decision (MayPlant over what its probes
// saw, which is part of the model's state), not the Cluster's (which never
// probes).
func (c *Cluster) modelCall(i int, s *scripts.Script, keys, args []string, mayPlant bool) ScriptCall {
	if s.GateArg >= 0 {
		args[s.GateArg+1] = c.gateArg(mayPlant)
	}
	return ScriptCall{Src: s.Fallback().Src, Keys: keys, Args: c.masters[i].gateArgs(s, args)}
}

// ModelAcquire is the acquire script's call on master i for req, as Acquire
// sends it from an agent that may plant (see MayPlant) or not: the lean
// script for a lean request (see AcquireRequest.lean). For the model
// checker only.
func (c *Cluster) ModelAcquire(i int, req AcquireRequest, mayPlant bool) ScriptCall {
	s, keys, args := c.acquireCall(req)
	return c.modelCall(i, s, keys, args, mayPlant)
}

// ModelRenew is the renew script's call on master i for holds, as the
// watchdog's Renew sends it (one batch) from an agent that may plant or
// not. For the model checker only.
func (c *Cluster) ModelRenew(i int, lease time.Duration, holds []RenewKey, mayPlant bool) ScriptCall {
	keys, args := c.renewArgs(lease, holds)
	return c.modelCall(i, scripts.Renew, keys, args, mayPlant)
}

// ModelRepair is the repair script's call on master i that re-creates
// hold (its Record as the Grant gave it) with lease, as the watchdog's Renew
// sends it to a master that answered the hold is gone while a majority
// renewed it, from an agent that may plant or not. For the model checker
// only.
func (c *Cluster) ModelRepair(i int, lease time.Duration, hold RenewKey, mayPlant bool) ScriptCall {
	k := c.repairCall(strconv.FormatInt(lease.Milliseconds(), 10), hold)
	return c.modelCall(i, scripts.Repair, k.keys, k.args, mayPlant)
}

// ModelRelease is the release script's call on master i that gives back
// holder's hold of name, as Release sends it. For the model checker only.
func (c *Cluster) ModelRelease(i int, name, holder string) ScriptCall {
	keys, args := c.releaseArgs(name, holder, name)
	return c.modelCall(i, scripts.Release, keys, args, false)
}

// ModelRaiseFence is the fence write-back's call on master i: name's
// counter raised to the end of fence's block, and holder's record made to
// carry fence, as a won acquire sends it to the masters behind its fence
// (see settleFence). For the model checker only.
func (c *Cluster) ModelRaiseFence(i int, name, holder string, fence, block int64) ScriptCall {
	keys, args := c.raiseFenceArgs(name, c.keys.Holder(name, holder), fence, block, false)
	return c.modelCall(i, scripts.RaiseFence, keys, args, false)
}

// ModelBootstrap is the call that plants an epoch marker with no
// quarantine, recording this agent's settings, on a new master (see
// BootstrapSettings). For the model checker only.
func (c *Cluster) ModelBootstrap(i int) ScriptCall {
	return c.modelCall(i, scripts.Bootstrap, []string{c.keys.Marker()}, []string{"bootstrap:model", c.settings}, false)
}

// ModelProbe is the health probe's call on master i (the gate, which plants
// a quarantined marker on a master that has none, and re-plants one that
// records other settings), as the probe sends it from an agent whose probes
// saw the markers as mayPlant and replant say (see MayPlant, Replant). For
// the model checker only.
func (c *Cluster) ModelProbe(i int, mayPlant, replant bool) ScriptCall {
	flag := "0"
	if replant {
		flag = "1"
	}
	args := append(c.gateArgs(), flag)
	return c.modelCall(i, scripts.Marker, []string{c.keys.Marker()}, args, mayPlant)
}

// ModelProbeView is what an agent's probe makes of the probe's reply (see
// scripts/lua/marker.lua): recorded is the settings the marker records, refusal the
// reply's refusal word and what follows. ok is false for a reply the probe
// counts as a failed probe, which leaves the view as it was.
func (c *Cluster) ModelProbeView(recorded, refusal string) (view rules.MarkerView, ok bool) {
	mk := markerReply{recorded: recorded}
	if err := mk.readRefusal(refusal, c.cfg.Settings, nil); err != nil {
		return rules.ViewUnknown, false
	}
	return ClassifyMarker(mk.refusal, mk.recorded, c.settings), true
}
