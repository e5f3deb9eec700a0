package agent

import (
	"strconv"

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
