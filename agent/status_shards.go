package agent

import (
	"strconv"
	"strings"

	"github.com/lock-agent/lock-agent/quorum"
)

// shardValues are the shard= values of STATUS's DATA line of a master that
// is a Redis Cluster, one per shard (protocol.Master writes them after every
// other field). Each value is the shard's own fields, as settings= writes
// its own: address=A;slots=S;state=ST, then quarantined_slots=N;
// quarantine_left=MS while some of its slots sit out a quarantine, and
// reason=WORD when it does not vote and says why. A standalone master has
// no shards, and its line is unchanged.
func shardValues(shards []quorum.ShardStatus) []string {
	var values []string
	for _, s := range shards {
		values = append(values, shardValue(s))
	}
	return values
}

// shardValue is one shard's shard= value.
func shardValue(s quorum.ShardStatus) string {
	var b strings.Builder
	b.WriteString("address=" + s.Address + ";slots=" + s.Slots + ";state=" + string(s.State))
	if s.QuarantinedSlots > 0 {
		b.WriteString(";quarantined_slots=" + strconv.Itoa(s.QuarantinedSlots))
		b.WriteString(";quarantine_left=" + strconv.FormatInt(s.QuarantineLeft.Milliseconds(), 10))
	}
	if s.State != quorum.StateUp && s.Err != "" {
		b.WriteString(";reason=" + reasonWord(s.Err))
	}
	return b.String()
}

// reasonWord is why a shard does not vote as one word of a shard= value:
// the words STATUS gives a master for the reasons it knows, else the text
// with spaces, '=' and ';' made '_'.
func reasonWord(err string) string {
	switch err {
	case quorum.QuarantineReason:
		return "new_or_lost_its_data"
	case quorum.UnplantedReason:
		return "no_marker_yet"
	}
	return strings.Map(func(r rune) rune {
		if r == ' ' || r == '=' || r == ';' {
			return '_'
		}
		return r
	}, err)
}
