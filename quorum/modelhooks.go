package quorum

import (
	"strconv"
	"time"
)

// This file is the narrow surface that the protocol's model checker
// (internal/model) reads: the scripts and the arguments a Cluster sends to
// one master, built by the functions the agent itself uses, so that a change
// to a script or to its arguments reaches the model in one place. Nothing
// here talks to a master; the agent does not call it.

// ScriptCall is one script call as a Cluster would send it to one master:
// the Lua source that EVAL runs and its KEYS and ARGV. Src is the variant
// whose gate reads the server's run_id (what a master that restarted runs:
// see script.afterRestart), so the model needs no script cache.
type ScriptCall struct {
	Src        string
	Keys, Args []string
}

// modelCall is s's call on master i with keys and args, its gate's epoch argument
// completed as master i's calls carry it.
func (c *Cluster) modelCall(i int, s *script, keys, args []string) ScriptCall {
	return ScriptCall{Src: s.fallback().src, Keys: keys, Args: c.masters[i].gateArgs(s, args)}
}

// ModelAcquire is the acquire script's call on master i for req, as Acquire
// sends it. For the model checker only.
func (c *Cluster) ModelAcquire(i int, req AcquireRequest) ScriptCall {
	keys, args := c.acquireArgs(req)
	return c.modelCall(i, acquireScript, keys, args)
}

// ModelRenew is the renew script's call on master i for holds, as the
// watchdog's Renew sends it (one batch). For the model checker only.
func (c *Cluster) ModelRenew(i int, lease time.Duration, holds []RenewKey) ScriptCall {
	keys, args := c.renewArgs(lease, holds)
	return c.modelCall(i, renewScript, keys, args)
}

// ModelRepair is the repair script's call on master i that re-creates
// hold (its Record as the Grant gave it) with lease, as the watchdog's Renew
// sends it to a master that answered the hold is gone while a majority
// renewed it. For the model checker only.
func (c *Cluster) ModelRepair(i int, lease time.Duration, hold RenewKey) ScriptCall {
	k := c.repairCall(strconv.FormatInt(lease.Milliseconds(), 10), hold)
	return c.modelCall(i, repairScript, k.keys, k.args)
}

// ModelRelease is the release script's call on master i that gives back
// holder's hold of name, as Release sends it. For the model checker only.
func (c *Cluster) ModelRelease(i int, name, holder string) ScriptCall {
	keys, args := c.releaseArgs(name, holder, name)
	return c.modelCall(i, releaseScript, keys, args)
}

// ModelRaiseFence is the fence write-back's call on master i: name's
// counter raised to the end of fence's block, and holder's record made to
// carry fence, as a won acquire sends it to the masters behind its fence
// (see settleFence). For the model checker only.
func (c *Cluster) ModelRaiseFence(i int, name, holder string, fence, block int64) ScriptCall {
	keys, args := c.raiseFenceArgs(name, c.holderKey(name, holder), fence, block)
	return c.modelCall(i, raiseFenceScript, keys, args)
}

// ModelBootstrap is the call that plants an epoch marker with no
// quarantine on a new master (see Bootstrap). For the model checker only.
func (c *Cluster) ModelBootstrap(i int) ScriptCall {
	return c.modelCall(i, bootstrapScript, []string{c.markerKey()}, []string{"bootstrap:model"})
}

// SettleFence is how a won acquire settles its fence (see settleFence):
// fences holds each master's granted fence (> 0 where granted); the
// grant's fence is the highest, atFence how many granted it, and behind
// the granting masters below it, to which it is written back (before the
// grant is answered when atFence is short of a quorum).
func SettleFence(fences []int64) (fence int64, atFence int, behind []int) {
	for _, f := range fences {
		fence = max(fence, f)
	}
	for i, f := range fences {
		switch {
		case f == fence:
			atFence++
		case f > 0:
			behind = append(behind, i)
		}
	}
	return fence, atFence, behind
}

// ModelProbe is the health probe's call on master i (the gate, which plants
// a quarantined marker on a master that has none), as the probe sends it.
// For the model checker only.
func (c *Cluster) ModelProbe(i int) ScriptCall {
	return ScriptCall{Src: markerScript.fallback().src, Keys: []string{c.markerKey()}, Args: c.gateArgs()}
}
