package agent

import (
	"strconv"

	"github.com/lock-agent/lock-agent/protocol"
	"github.com/lock-agent/lock-agent/quorum"
)

// ClusterSettings are the settings of l that the safety of every agent of
// a cluster depends on, as every master records them (see quorum.Settings):
// the lease and drift factor (validity), the quarantine they imply, and the
// cohort bounds (the fence block a grant reserves). An agent whose settings
// differ from those a majority of masters records grants nothing. The
// key prefix is not among them: agents with another prefix use other keys,
// another marker among them (see docs/operations.md).
func ClusterSettings(l LockConfig) quorum.Settings {
	return quorum.Settings{
		{Name: "lease", Value: l.Lease.String()},
		{Name: "drift", Value: strconv.FormatFloat(l.DriftFactor, 'g', -1, 64)},
		{Name: "quarantine", Value: Quarantine(l).String()},
		{Name: "cohort_hold", Value: l.CohortMaxHold.String()},
		{Name: "cohort_handoffs", Value: strconv.Itoa(l.CohortMaxHandoffs)},
	}
}

// statusLine is STATUS's DATA line of master m: its state, why it does not
// vote (reason, one word; quarantine_left), the settings its marker records,
// and a Redis Cluster's shards (see withShards).
func statusLine(tag string, m quorum.MasterStatus) protocol.Master {
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

// settingsDiffer is STATUS's settings_differ while a majority of masters
// records other settings than the agent's (problem, see
// quorum.Cluster.SettingsProblem): the names of the settings that differ,
// as ERR SETTINGS names them; nil (no field) when there is no problem.
func settingsDiffer(problem error) []string {
	if problem == nil {
		return nil
	}
	names := []string{}
	for _, d := range quorum.SettingsDiffOf(problem) {
		names = append(names, d.Name)
	}
	return names
}
