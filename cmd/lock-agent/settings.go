package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/lock-agent/lock-agent/quorum/rules"

	"github.com/lock-agent/lock-agent/agent"
	"github.com/lock-agent/lock-agent/quorum"
)

// settingsCmd shows the cluster settings each master records against a
// config's, and with -apply records the config's in every master: the
// documented way to change a setting that safety depends on (lease,
// drift_factor, ...) on a running cluster (see docs/operations.md). The
// masters are quarantined for the longest of the old and new quarantines,
// so nothing granted under the old settings is still held when an agent
// with the new ones grants.
func settingsCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("settings", stderr)
	path := fs.String("config", "", "config file with the new settings and the masters")
	apply := fs.Bool("apply", false, "record the config's settings in every master (else only show them)")
	minQuarantine := fs.Duration("min-quarantine", 0, "quarantine at least this long (the running agents' quarantine, where the masters record no settings)")
	cfg, code, done := parseConfigFlags(fs, path, args, "lock-agent settings -config FILE [-apply] [-min-quarantine DURATION]", stdout, stderr)
	if done {
		return code
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	want := agent.ClusterSettings(cfg.Lock)
	recorded, err := quorum.ReadSettings(ctx, cfg.Lock.KeyPrefix, cfg.Masters)
	fmt.Fprintf(stdout, "the config's settings: %s\n", want)
	for _, r := range recorded {
		fmt.Fprintf(stdout, "%s: %s\n", r.Master, describeRecorded(r, want))
	}
	if err != nil {
		printError(stderr, "settings", err)
	}
	switch {
	case !*apply && err != nil:
		return exitFailure
	case !*apply:
		return exitOK
	case err == nil && recordsAll(recorded, want):
		fmt.Fprintln(stdout, "every master records the config's settings already: nothing to change")
		return exitOK
	}
	return applySettings(ctx, cfg, want, recorded, *minQuarantine, stdout, stderr)
}

// recordsAll says whether every master of recorded records want: a change
// to them would cost a quarantine for nothing.
func recordsAll(recorded []quorum.MarkerSettings, want quorum.Settings) bool {
	for _, r := range recorded {
		if !r.Marked || len(want.Diff(r.Settings)) > 0 {
			return false
		}
	}
	return len(recorded) > 0
}

// describeRecorded says what master r records against want.
func describeRecorded(r quorum.MarkerSettings, want quorum.Settings) string {
	switch {
	case !r.Marked:
		return "no marker (new, or lost its data)"
	case len(r.Settings) == 0:
		return "records no settings"
	case len(want.Diff(r.Settings)) == 0:
		return "records the config's settings"
	}
	return "differs: " + quorum.DescribeDiff(want, r.Settings, "it records")
}

// applySettings records want in every master, with a quarantine of the
// longest of want's and every recorded one (and minimum).
func applySettings(ctx context.Context, cfg agent.Config, want quorum.Settings, recorded []quorum.MarkerSettings, minimum time.Duration,
	stdout, stderr io.Writer) int {
	quarantine, err := changeQuarantine(want, recorded, minimum)
	if err != nil {
		printError(stderr, "settings", err)
		return exitUsage
	}
	changed, err := quorum.ChangeSettings(ctx, cfg.Lock.KeyPrefix, want, quarantine, cfg.Masters)
	for _, m := range cfg.Masters {
		if slices.Contains(changed, m.Name) {
			fmt.Fprintf(stdout, "%s: records the new settings; votes again in %v\n", m.Name, quarantine)
		} else {
			fmt.Fprintf(stdout, "%s: NOT changed (unreachable); agents with the new settings plant it anew once they are a majority\n", m.Name)
		}
	}
	if err != nil {
		printError(stderr, "settings", err)
	}
	if len(changed) < rules.Majority(len(cfg.Masters)) {
		fmt.Fprintf(stderr, "lock-agent: only %d of %d masters changed: no settings have a majority now; run it again when the masters answer\n",
			len(changed), len(cfg.Masters))
		return exitFailure
	}
	fmt.Fprintf(stdout, "\nNo agent grants for %v. Agents still running with the old settings grant nothing from now on (their holds are lost):\n"+
		"restart every agent with the new config (%s).\n", quarantine, want)
	return exitOK
}

// changeQuarantine is the quarantine of a change to want: at least want's,
// every quarantine the masters record, and minimum. A master that records
// no settings leaves the running agents' quarantine unknown: then minimum
// must say it.
func changeQuarantine(want quorum.Settings, recorded []quorum.MarkerSettings, minimum time.Duration) (time.Duration, error) {
	q, err := settingQuarantine(want)
	if err != nil {
		return 0, err
	}
	q = max(q, minimum)
	for _, r := range recorded {
		if !r.Marked {
			continue
		}
		old, err := settingQuarantine(r.Settings)
		if err != nil && minimum == 0 {
			return 0, fmt.Errorf("%s records no quarantine (%w): pass -min-quarantine with the running agents' quarantine", r.Master, err)
		}
		q = max(q, old)
	}
	return q, nil
}

// settingQuarantine reads the quarantine among s.
func settingQuarantine(s quorum.Settings) (time.Duration, error) {
	v, ok := s.Get("quarantine")
	if !ok {
		return 0, errors.New("no quarantine setting")
	}
	return time.ParseDuration(v)
}
