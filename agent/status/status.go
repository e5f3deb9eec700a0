// Package status turns what quorum says of each master into STATUS's
// lines: a master's state and why it does not vote, each word as the
// protocol writes it, and a Redis Cluster's shards.
package status

import (
	"strconv"
	"strings"

	"github.com/lock-agent/lock-agent/protocol"
	"github.com/lock-agent/lock-agent/quorum"
)

// Master is STATUS's DATA line of master m: its state, why it does not vote
// (reason, one word; quarantine_left), the settings its marker records, and
// a Redis Cluster's shards (see shardValues).
func Master(tag string, m quorum.MasterStatus) protocol.Master {
	l := protocol.Master{Tag: tag, Name: m.Name, Address: m.Address, State: string(m.State), Settings: m.Settings, Shards: shardValues(m.Shards)}
	switch {
	case m.State == quorum.StateQuarantined && m.Unplanted:
		l.Reason, l.Data = "no_marker_yet", dataWord(m.Data)
	case m.State == quorum.StateQuarantined:
		l.QuarantineLeft, l.HasQuarantineLeft = m.QuarantineLeft, true
		l.Reason, l.Data = "new_or_lost_its_data", dataWord(m.Data)
	case m.State == quorum.StateSettings:
		l.Reason = "records_other_settings"
	case m.State == quorum.StateUnsafe, m.State == quorum.StateDown:
		l.Reason = wordOf(m.Err)
	}
	return l
}

// dataWord is STATUS's data= of a quarantined master: new, lost or unknown
// (see quorum.ClassifyData).
func dataWord(d quorum.Data) string {
	if d == quorum.DataNone {
		return string(quorum.DataUnknown)
	}
	return string(d)
}

// SettingsDiffer is STATUS's settings_differ while a majority of masters
// records other settings than the agent's (problem, see
// quorum.Cluster.SettingsProblem): the names of the settings that differ,
// as ERR SETTINGS names them; nil (no field) when there is no problem.
func SettingsDiffer(problem error) []string {
	if problem == nil {
		return nil
	}
	names := []string{}
	for _, d := range quorum.SettingsDiffOf(problem) {
		names = append(names, d.Name)
	}
	return names
}

// wordOf makes free text one protocol value: no spaces, no '='.
func wordOf(s string) string {
	return strings.Map(func(r rune) rune {
		if r == ' ' || r == '=' {
			return '_'
		}
		return r
	}, s)
}

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
