package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	lockagent "github.com/lock-agent/lock-agent/clients/go"
	"github.com/lock-agent/lock-agent/quorum"
)

// master is one master as status shows it: what the Go client reads of
// its STATUS line, and, for a master that is a Redis Cluster, its shards.
type master struct {
	lockagent.Master
	Shards []shard `json:"shards,omitempty"`
}

// shard is one shard of a master that is a Redis Cluster: one shard= field
// of its master's STATUS line (docs/protocol.md, STATUS).
type shard struct {
	Address string `json:"address"` // its primary's
	Slots   string `json:"slots"`   // as "0-5460,6000"
	State   string `json:"state"`
	// QuarantinedSlots is how many of its slots sit out a quarantine,
	// QuarantineLeftMS until the last ends.
	QuarantinedSlots int    `json:"quarantined_slots,omitempty"`
	QuarantineLeftMS int64  `json:"quarantine_left_ms,omitempty"`
	Reason           string `json:"reason,omitempty"`
}

// shardsOf reads the shard= fields of a STATUS DATA line's words, in
// order. The field repeats, once per shard, so a map of the line's fields
// would keep only one.
func shardsOf(words []string) []shard {
	var out []shard
	for _, w := range words {
		v, ok := strings.CutPrefix(w, "shard=")
		if !ok {
			continue
		}
		f := map[string]string{}
		for _, kv := range strings.Split(v, ";") {
			k, val, _ := strings.Cut(kv, "=")
			f[k] = val
		}
		n, _ := strconv.Atoi(f["quarantined_slots"])
		left, _ := strconv.ParseInt(f["quarantine_left"], 10, 64)
		out = append(out, shard{Address: f["address"], Slots: f["slots"], State: f["state"], QuarantinedSlots: n, QuarantineLeftMS: left, Reason: f["reason"]})
	}
	return out
}

// printShards writes a row per shard of m under its master's row of
// status's table: its slots, its primary, its state and why.
func printShards(tw io.Writer, m master) {
	for _, sh := range m.Shards {
		fmt.Fprintf(tw, "  slots %s\t%s\t%s\t%s\n", sh.Slots, sh.Address, sh.State, sh.why())
	}
}

// why says why a shard, or some of its slots, does not vote, in words: its
// reason, and how many of its slots sit out a quarantine and how long.
func (sh shard) why() string {
	var why []string
	switch sh.Reason {
	case "", "new_or_lost_its_data":
	case "no_marker_yet":
		why = append(why, quorum.UnplantedReason)
	default:
		why = append(why, sh.Reason)
	}
	if sh.QuarantinedSlots > 0 {
		slots := fmt.Sprintf("%d of its slots are", sh.QuarantinedSlots)
		if sh.QuarantinedSlots == 1 {
			slots = "one of its slots is"
		}
		why = append(why, fmt.Sprintf("%s new or lost their data; they vote again in %v: wait; never lock-agent bootstrap a master that may have served locks",
			slots, time.Duration(sh.QuarantineLeftMS)*time.Millisecond))
	}
	return strings.Join(why, "; ")
}
