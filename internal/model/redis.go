package model

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"
	"github.com/lock-agent/lock-agent/quorum"
)

// epochBase is model time 0 on the masters' clocks (TIME): a whole second,
// so that a world that lasts less than a second keeps the fence counters'
// clock part (whole seconds) the same, and only the floors tell fences apart.
var epochBase = time.Unix(1_700_000_000, 0)

// entry is one key of a master's keyspace. The scripts use strings, sets
// and hashes only (the queue's sorted sets are not in this world).
type entry struct {
	key  string
	kind string   // "string", "set" or "hash", as miniredis names them
	vals []string // the value; a set's sorted members; a hash's sorted field, value pairs
	// expireAt is when the key expires on its master's clock, in ms from
	// model time 0 (0: never): a TTL relative to the model clock, so time
	// advancing in the model expires it, as PX on a real master does.
	expireAt int64
}

// keyspace is one master's data: its keys in order. A keyspace is never
// changed once made, so states share it.
type keyspace struct {
	entries []entry
	digest  [16]byte
}

var emptyKeyspace = newKeyspace(nil)

func newKeyspace(entries []entry) *keyspace {
	ks := &keyspace{entries: entries}
	h := sha256.New()
	for _, e := range entries {
		fmt.Fprintf(h, "%q %s %d", e.key, e.kind, e.expireAt)
		for i, v := range e.vals {
			// The epoch value an agent planted names the agent and counts its
			// gate calls; no script compares it, so states that differ in it
			// alone are the same state.
			if e.kind == "hash" && strings.HasSuffix(e.key, "epoch") && i%2 == 1 && e.vals[i-1] == "epoch" {
				v = "*"
			}
			fmt.Fprintf(h, " %q", v)
		}
		h.Write([]byte{'\n'})
	}
	copy(ks.digest[:], h.Sum(nil))
	return ks
}

// expire is ks at time now on its master's clock: without the keys whose
// lease ran out.
func (ks *keyspace) expire(now int64) *keyspace {
	kept := ks.entries[:0:0]
	for _, e := range ks.entries {
		if e.expireAt == 0 || e.expireAt > now {
			kept = append(kept, e)
		}
	}
	if len(kept) == len(ks.entries) {
		return ks
	}
	return newKeyspace(kept)
}

// nextExpiry is the soonest expiry after now (0: none).
func (ks *keyspace) nextExpiry(now int64) int64 {
	var next int64
	for _, e := range ks.entries {
		if e.expireAt > now && (next == 0 || e.expireAt < next) {
			next = e.expireAt
		}
	}
	return next
}

// field is a hash key's field value ("" if absent).
func (ks *keyspace) field(key, name string) string {
	for _, e := range ks.entries {
		if e.key == key && e.kind == "hash" {
			for i := 0; i+1 < len(e.vals); i += 2 {
				if e.vals[i] == name {
					return e.vals[i+1]
				}
			}
		}
	}
	return ""
}

// runner runs the project's scripts on a keyspace in one in-process
// miniredis: it loads the keyspace, sets the server's clock to the model's,
// runs the script by EVAL (dispatched in process, no socket) and reads the
// keyspace back. Loading a master's few keys costs less than keeping a
// server per state. Results are remembered: the same script on the same
// keyspace at the same time answers the same.
type runner struct {
	srv   *miniredis.Miniredis
	memo  map[[16]byte]ranResult
	evals int // scripts really run (not remembered)
}

type ranResult struct {
	reply any
	after *keyspace
}

func newRunner() (*runner, error) {
	srv := miniredis.NewMiniRedis()
	if err := srv.StartAddr("127.0.0.1:0"); err != nil {
		return nil, err
	}
	return &runner{srv: srv, memo: map[[16]byte]ranResult{}}, nil
}

func (r *runner) close() { r.srv.Close() }

// run runs call on ks at time now on its master's clock, and returns the
// reply (int, string, []any or error) and the keyspace after. tag names the
// call for the memo: two calls with the same tag differ at most in the
// epoch they would plant (see newKeyspace).
func (r *runner) run(ks *keyspace, now int64, tag string, build func() quorum.ScriptCall) (any, *keyspace) {
	key := memoKey(ks, now, tag)
	if res, ok := r.memo[key]; ok {
		return res.reply, res.after
	}
	call := build()
	r.load(ks, now)
	args := append([]string{"EVAL", call.Src, strconv.Itoa(len(call.Keys))}, call.Keys...)
	args = append(args, call.Args...)
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	r.srv.Server().Dispatch(server.NewPeer(w), args)
	w.Flush()
	reply, err := server.ParseReply(bufio.NewReader(&buf))
	if err != nil {
		reply = err
	}
	after := r.read(now)
	r.evals++
	r.memo[key] = ranResult{reply, after}
	return reply, after
}

func memoKey(ks *keyspace, now int64, tag string) [16]byte {
	b := append(ks.digest[:], tag...)
	b = binary.LittleEndian.AppendUint64(b, uint64(now))
	var out [16]byte
	binary.LittleEndian.PutUint64(out[:8], maphash.Bytes(seedA, b))
	binary.LittleEndian.PutUint64(out[8:], maphash.Bytes(seedB, b))
	return out
}

// load makes the server hold ks at time now on its master's clock.
func (r *runner) load(ks *keyspace, now int64) {
	r.srv.FlushAll()
	r.srv.SetTime(epochBase.Add(time.Duration(now) * time.Millisecond))
	for _, e := range ks.entries {
		switch e.kind {
		case "string":
			r.srv.Set(e.key, e.vals[0])
		case "set":
			r.srv.SetAdd(e.key, e.vals...)
		case "hash":
			r.srv.HSet(e.key, e.vals...)
		}
		if e.expireAt > 0 {
			r.srv.SetTTL(e.key, time.Duration(e.expireAt-now)*time.Millisecond)
		}
	}
}

// read is the server's keyspace at time now on its master's clock.
func (r *runner) read(now int64) *keyspace {
	keys := r.srv.Keys()
	slices.Sort(keys)
	entries := make([]entry, 0, len(keys))
	for _, k := range keys {
		e := entry{key: k, kind: r.srv.Type(k)}
		switch e.kind {
		case "string":
			v, _ := r.srv.Get(k)
			e.vals = []string{v}
		case "set":
			e.vals, _ = r.srv.Members(k)
			slices.Sort(e.vals)
		case "hash":
			fields, _ := r.srv.HKeys(k)
			slices.Sort(fields)
			for _, f := range fields {
				e.vals = append(e.vals, f, r.srv.HGet(k, f))
			}
		default:
			panic("model: a script made a key of a kind the model does not keep: " + e.kind)
		}
		if ttl := r.srv.TTL(k); ttl > 0 {
			e.expireAt = now + ttl.Milliseconds()
		}
		entries = append(entries, e)
	}
	return newKeyspace(entries)
}

// ints reads a reply that is an integer or an array of integers.
func ints(reply any) ([]int64, error) {
	switch v := reply.(type) {
	case int:
		return []int64{int64(v)}, nil
	case []any:
		out := make([]int64, len(v))
		for i, x := range v {
			n, ok := x.(int)
			if !ok {
				return nil, fmt.Errorf("model: non-integer %v in reply %v", x, v)
			}
			out[i] = int64(n)
		}
		return out, nil
	case error:
		return nil, v
	}
	return nil, fmt.Errorf("model: unexpected reply %v", reply)
}
