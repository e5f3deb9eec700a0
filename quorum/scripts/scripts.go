// Package scripts is every Lua script the agent runs on a master: the .lua
// files in lua/, embedded, and one registry of the scripts made of them.
package scripts

import (
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"fmt"
	"strings"
)

// Script is a Lua script with its SHA1, run by EVALSHA with an EVAL fallback.
type Script struct {
	Src, SHA string
	// GateArg is, for a script that runs the gate, the index of its epoch
	// argument, to which each master's call appends ";" and the run_id the
	// agent last verified for that master (-1 for other scripts).
	GateArg int
	// AfterRestart, for a script that runs the gate, is the variant whose
	// gate reads the server's run_id (INFO server, a third of the
	// throughput if done on every call). EVALSHA runs the variant that only
	// compares the marker's run_id with the one the agent verified (which
	// finds data copied from another master, REPLICAOF); a master that
	// restarted has lost its script cache, so its first EVALSHA answers
	// NOSCRIPT and the fallback EVAL runs this one, in the same round. The
	// probe always runs it.
	AfterRestart *Script
	// Sharded is the variant a master that is a Redis Cluster runs: its
	// fallback, publishing with SPUBLISH, which reaches only the shard of
	// the channel's slot (see quorum/shards.go).
	Sharded *Script
}

func newScript(src string, gateArg int) *Script {
	sum := sha1.Sum([]byte(src))
	s := &Script{Src: src, SHA: hex.EncodeToString(sum[:]), GateArg: gateArg}
	if strings.Contains(src, "local CHECK_RUN = true") {
		s.AfterRestart = &Script{Src: src, SHA: s.SHA, GateArg: gateArg}
		s.Src = strings.Replace(src, "local CHECK_RUN = true", "local CHECK_RUN = false", 1)
		sum := sha1.Sum([]byte(s.Src))
		s.SHA = hex.EncodeToString(sum[:])
	}
	sharded := shardedVariant(s.Fallback())
	for _, v := range []*Script{s, s.AfterRestart, sharded} {
		if v != nil {
			v.Sharded = sharded // whichever variant a cluster master is handed
		}
	}
	return s
}

// shardedVariant is s publishing with SPUBLISH instead of PUBLISH; s itself
// if it publishes nothing.
func shardedVariant(s *Script) *Script {
	const publish, spublish = "redis.call('PUBLISH',", "redis.call('SPUBLISH',"
	if !strings.Contains(s.Src, publish) {
		return s
	}
	src := strings.ReplaceAll(s.Src, publish, spublish)
	sum := sha1.Sum([]byte(src))
	return &Script{Src: src, SHA: hex.EncodeToString(sum[:]), GateArg: s.GateArg}
}

// Fallback is what runs when the master does not know s: see AfterRestart.
func (s *Script) Fallback() *Script {
	if s.AfterRestart != nil {
		return s.AfterRestart
	}
	return s
}

// LeanArgs is how many arguments the lean acquire script takes (see
// quorum's AcquireRequest.lean): acquire.lua's first 13, up to the since of
// its who-info; the rest it leaves absent.
const LeanArgs = 13

// The registry: every script the agent runs, each the text of its files in
// lua/ (the libraries it calls, then its own), and for one that runs the
// gate the index of its epoch argument (see Script.GateArg; -1: none).
// Every one is loaded into a master when it connects (see
// master.loadScripts). What each script takes and returns is written at
// the head of its own file.
var (
	Acquire     = register(3, "gate", "queue", "fences", "tails", "record", "acquire")
	AcquireLean = register(3, "gate", "fences", "record", "acquire_lean", "queue", "tails", "acquire") // see AcquireRequest.lean
	Renew       = register(0, "gate", "tails", "renew")
	Repair      = register(3, "gate", "tails", "repair")
	Release     = register(-1, "release")
	RaiseFence  = register(-1, "raise_fence")
	Reserve     = register(1, "gate", "fences", "reserve")
	Downgrade   = register(-1, "downgrade")
	Retag       = register(-1, "retag")
	Who         = register(-1, "tails", "who", "holders")

	// The batches (see quorum/master.go, batcher): the acquire scripts' and release.lua's
	// bodies run once per item. The gate's epoch argument is the first item's.
	AcquireMany     = registerSrc(3, join("gate", "queue", "fences", "tails", "record", "acquire_many")+batch(7, 18, "acquire"))
	AcquireLeanMany = registerSrc(3, join("gate", "queue", "fences", "tails", "record", "acquire_many")+batch(7, LeanArgs, "acquire_lean", "acquire"))
	ReleaseMany     = registerSrc(-1, batch(2, 4, "release"))

	// The epoch marker (see gate.lua).
	Marker      = register(0, "gate", "marker")
	Bootstrap   = register(-1, "gate", "bootstrap")
	Change      = register(-1, "gate", "change")
	Horizon     = register(-1, "horizon")
	SettleTails = register(-1, "settle_tails")

	// The queue (see quorum/waiters.go).
	Enqueue  = register(0, "gate", "enqueue")
	Settle   = register(-1, "settle")
	Dequeue  = register(-1, "dequeue")
	QueueLen = register(-1, "queue_len")

	// Tails (see quorum/hold.go).
	End         = register(-1, "tails", "end")
	Revoke      = register(-1, "tails", "revoke")
	RevokedLive = register(-1, "tails", "revoked_live")
	Delayed     = register(-1, "tails", "delayed")

	// Observers and leaders (see quorum/watch.go).
	SetValue = register(-1, "set_value")
	Check    = register(-1, "tails", "check")
	Leader   = register(-1, "tails", "leader", "holders")

	// Waiting records and caches (see quorum/waiters.go, quorum/cache.go).
	SetWaiting     = register(-1, "set_waiting")
	Waiting        = register(-1, "waiting")
	Cached         = register(-1, "cached")
	CacheNote      = register(-1, "cache_note")
	CacheOrRelease = register(-1, "cache_or_release", "release")
)

// All are every registered script, in the order registered: each is
// loaded into a master when it connects or loses its data.
var All []*Script

//go:embed lua/*.lua
var luaFiles embed.FS

// register makes a script of the files named (lua/NAME.lua, in order) and
// lists it in All.
func register(gateArg int, files ...string) *Script {
	return registerSrc(gateArg, join(files...))
}

// registerSrc makes a script of src and lists it in All.
func registerSrc(gateArg int, src string) *Script {
	s := newScript(src, gateArg)
	All = append(All, s)
	return s
}

// join is the text the files named send, one after the other.
func join(files ...string) string {
	var b strings.Builder
	for _, f := range files {
		b.WriteString(Text(f))
	}
	return b.String()
}

// batch is the script that runs the body of the files named (lua/NAME.lua,
// in order) once per item of a batch of nk keys and na arguments each:
// lua/batch.lua, a template, filled in.
func batch(nk, na int, files ...string) string {
	return fmt.Sprintf(Text("batch"), nk, na, join(files...))
}

// Text is the text that lua/NAME.lua sends: a newline, then the file
// without its leading comment lines (its doc, which no master needs to
// parse).
func Text(name string) string {
	b, err := luaFiles.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic(err) // a name in the registry above that has no file
	}
	text := string(b)
	for strings.HasPrefix(text, "--") {
		_, text, _ = strings.Cut(text, "\n")
	}
	return "\n" + text
}
