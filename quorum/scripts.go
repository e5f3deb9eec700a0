package quorum

import (
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"fmt"
	"strings"
)

// recordFields are the fields of a holder's record hash, in the order the
// scripts take and return them.
var recordFields = []string{"mode", "limit", "slot", "fence", "agent", "pid", "uid", "owner", "since", "value"}

// script is a Lua script with its SHA1, run by EVALSHA with an EVAL fallback.
type script struct {
	src, sha string
	// gateArg is, for a script that runs the gate, the index of its epoch
	// argument, to which each master's call appends ";" and the run_id the
	// agent last verified for that master (-1 for other scripts).
	gateArg int
	// afterRestart, for a script that runs the gate, is the variant whose
	// gate reads the server's run_id (INFO server, a third of the
	// throughput if done on every call). EVALSHA runs the variant that only
	// compares the marker's run_id with the one the agent verified (which
	// finds data copied from another master, REPLICAOF); a master that
	// restarted has lost its script cache, so its first EVALSHA answers
	// NOSCRIPT and the fallback EVAL runs this one, in the same round. The
	// probe always runs it.
	afterRestart *script
	// sharded is the variant a master that is a Redis Cluster runs: its
	// fallback (see shards.go), publishing with SPUBLISH, which reaches
	// only the shard of the channel's slot (see shardwatch.go).
	sharded *script
}

func newScript(src string, gateArg int) *script {
	sum := sha1.Sum([]byte(src))
	s := &script{src: src, sha: hex.EncodeToString(sum[:]), gateArg: gateArg}
	if strings.Contains(src, "local CHECK_RUN = true") {
		s.afterRestart = &script{src: src, sha: s.sha, gateArg: gateArg}
		s.src = strings.Replace(src, "local CHECK_RUN = true", "local CHECK_RUN = false", 1)
		sum := sha1.Sum([]byte(s.src))
		s.sha = hex.EncodeToString(sum[:])
	}
	sharded := shardedVariant(s.fallback())
	for _, v := range []*script{s, s.afterRestart, sharded} {
		if v != nil {
			v.sharded = sharded // whichever variant a cluster master is handed
		}
	}
	return s
}

// shardedVariant is s publishing with SPUBLISH instead of PUBLISH; s itself
// if it publishes nothing.
func shardedVariant(s *script) *script {
	const publish, spublish = "redis.call('PUBLISH',", "redis.call('SPUBLISH',"
	if !strings.Contains(s.src, publish) {
		return s
	}
	src := strings.ReplaceAll(s.src, publish, spublish)
	sum := sha1.Sum([]byte(src))
	return &script{src: src, sha: hex.EncodeToString(sum[:]), gateArg: s.gateArg}
}

// fallback is what runs when the master does not know s: see afterRestart.
func (s *script) fallback() *script {
	if s.afterRestart != nil {
		return s.afterRestart
	}
	return s
}

// The registry: every script the agent runs, each the text of its files in
// lua/ (the libraries it calls, then its own), and for one that runs the
// gate the index of its epoch argument (see script.gateArg; -1: none).
// Every one is loaded into a master when it connects (see
// master.loadScripts). What each script takes and returns is written at
// the head of its own file.
var (
	acquireScript     = register(3, "gate", "queue", "fences", "tails", "record", "acquire")
	acquireLeanScript = register(3, "gate", "fences", "record", "acquire_lean", "queue", "tails", "acquire") // see AcquireRequest.lean
	renewScript       = register(0, "gate", "tails", "renew")
	repairScript      = register(3, "gate", "tails", "repair")
	releaseScript     = register(-1, "release")
	raiseFenceScript  = register(-1, "raise_fence")
	reserveScript     = register(1, "gate", "fences", "reserve")
	downgradeScript   = register(-1, "downgrade")
	retagScript       = register(-1, "retag")
	whoScript         = register(-1, "tails", "who", "holders")

	// The batches (see batch.go): the acquire scripts' and release.lua's
	// bodies run once per item. The gate's epoch argument is the first item's.
	acquireManyScript     = registerSrc(3, join("gate", "queue", "fences", "tails", "record", "acquire_many")+batch(7, 18, "acquire"))
	acquireLeanManyScript = registerSrc(3, join("gate", "queue", "fences", "tails", "record", "acquire_many")+batch(7, leanArgs, "acquire_lean", "acquire"))
	releaseManyScript     = registerSrc(-1, batch(2, 4, "release"))

	// The epoch marker (see gate.lua).
	markerScript      = register(0, "gate", "marker")
	bootstrapScript   = register(-1, "gate", "bootstrap")
	changeScript      = register(-1, "gate", "change")
	horizonScript     = register(-1, "horizon")
	settleTailsScript = register(-1, "settle_tails")

	// The queue (see queue.go).
	enqueueScript  = register(0, "gate", "enqueue")
	settleScript   = register(-1, "settle")
	dequeueScript  = register(-1, "dequeue")
	queueLenScript = register(-1, "queue_len")

	// Tails (see tails.go).
	endScript         = register(-1, "tails", "end")
	revokeScript      = register(-1, "tails", "revoke")
	revokedLiveScript = register(-1, "tails", "revoked_live")
	delayedScript     = register(-1, "tails", "delayed")

	// Observers and leaders (see observe.go).
	setValueScript = register(-1, "set_value")
	checkScript    = register(-1, "tails", "check")
	leaderScript   = register(-1, "tails", "leader", "holders")

	// Waiting records and caches (see waiting.go, cache.go).
	setWaitingScript     = register(-1, "set_waiting")
	waitingScript        = register(-1, "waiting")
	cachedScript         = register(-1, "cached")
	cacheNoteScript      = register(-1, "cache_note")
	cacheOrReleaseScript = register(-1, "cache_or_release", "release")
)

// allScripts are every registered script, in the order registered: each is
// loaded into a master when it connects or loses its data.
var allScripts []*script

//go:embed lua/*.lua
var luaFiles embed.FS

// register makes a script of the files named (lua/NAME.lua, in order) and
// lists it in allScripts.
func register(gateArg int, files ...string) *script {
	return registerSrc(gateArg, join(files...))
}

// registerSrc makes a script of src and lists it in allScripts.
func registerSrc(gateArg int, src string) *script {
	s := newScript(src, gateArg)
	allScripts = append(allScripts, s)
	return s
}

// join is the text the files named send, one after the other.
func join(files ...string) string {
	var b strings.Builder
	for _, f := range files {
		b.WriteString(luaText(f))
	}
	return b.String()
}

// batch is the script that runs the body of the files named (lua/NAME.lua,
// in order) once per item of a batch of nk keys and na arguments each:
// lua/batch.lua, a template, filled in.
func batch(nk, na int, files ...string) string {
	return fmt.Sprintf(luaText("batch"), nk, na, join(files...))
}

// luaText is the text that lua/NAME.lua sends: a newline, then the file
// without its leading comment lines (its doc, which no master needs to
// parse).
func luaText(name string) string {
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
