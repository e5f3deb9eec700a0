package quorum

import (
	"errors"
	"fmt"
	"strings"

	"github.com/redis/rueidis"
)

// Settings are the settings that the safety of a cluster's agents depends
// on (the lease, the drift allowance, the quarantine they imply, the cohort
// bounds: the agent chooses them, see agent.ClusterSettings). Every master's
// epoch marker records them (see gateLua), and a master votes only for an
// agent whose settings it records: two agents that would overlap with
// different leases or quarantines never count each other's masters. They
// are an ordered list, written to and read from the masters by this package
// alone, in one canonical form (String).
type Settings []Setting

// Setting is one named setting. Names are [a-z_]; values are one word with
// no ';' (a duration as Go prints it, a number).
type Setting struct{ Name, Value string }

// String is the canonical form the masters record: "name=value" pairs in
// order, joined by ";".
func (s Settings) String() string {
	parts := make([]string, len(s))
	for i, kv := range s {
		parts[i] = kv.Name + "=" + kv.Value
	}
	return strings.Join(parts, ";")
}

// ParseSettings reads String's form. Parts without "=" are skipped: what a
// master records is read, never trusted to be well formed.
func ParseSettings(text string) Settings {
	var s Settings
	for _, part := range strings.Split(text, ";") {
		if name, value, ok := strings.Cut(part, "="); ok {
			s = append(s, Setting{name, value})
		}
	}
	return s
}

// Get returns the value of the setting called name, and whether there is one.
func (s Settings) Get(name string) (string, bool) {
	for _, kv := range s {
		if kv.Name == name {
			return kv.Value, true
		}
	}
	return "", false
}

// validate says what makes s unfit to be recorded, nil if nothing.
func (s Settings) validate() error {
	for _, kv := range s {
		if kv.Name == "" || strings.Trim(kv.Name, "abcdefghijklmnopqrstuvwxyz_") != "" {
			return fmt.Errorf("quorum: bad setting name %q", kv.Name)
		}
		if strings.ContainsAny(kv.Value, "; \t\r\n") {
			return fmt.Errorf("quorum: bad value %q of setting %s", kv.Value, kv.Name)
		}
	}
	return nil
}

// SettingDiff is one setting whose value differs: "" where it is absent.
type SettingDiff struct{ Name, Ours, Recorded string }

// Diff lists the settings whose values differ between s (ours) and
// recorded: ours in order, then those only recorded.
func (s Settings) Diff(recorded Settings) []SettingDiff {
	var out []SettingDiff
	for _, kv := range s {
		if v, _ := recorded.Get(kv.Name); v != kv.Value {
			out = append(out, SettingDiff{kv.Name, kv.Value, v})
		}
	}
	for _, kv := range recorded {
		if _, ok := s.Get(kv.Name); !ok {
			out = append(out, SettingDiff{kv.Name, "", kv.Value})
		}
	}
	return out
}

// DescribeDiff says in a few words how recorded differs from ours, e.g.
// "lease=20s here, recorded lease=1s". verb is how the masters are said to
// record it ("the master records", "the masters record").
func DescribeDiff(ours, recorded Settings, verb string) string {
	var here, there []string
	for _, d := range ours.Diff(recorded) {
		here = append(here, d.Name+"="+orNone(d.Ours))
		there = append(there, d.Name+"="+orNone(d.Recorded))
	}
	if len(here) == 0 {
		return "the same settings here and there"
	}
	return strings.Join(here, ", ") + " here, " + verb + " " + strings.Join(there, ", ")
}

func orNone(v string) string {
	if v == "" {
		return "(none)"
	}
	return v
}

// SettingsError is a master's refusal to vote for an agent whose settings
// differ from those its epoch marker records. It unwraps to ErrSettings.
type SettingsError struct {
	Ours, Recorded Settings
}

func (e *SettingsError) Error() string {
	return DescribeDiff(e.Ours, e.Recorded, "the master records")
}

// Unwrap makes a SettingsError match ErrSettings.
func (e *SettingsError) Unwrap() error { return ErrSettings }

// gateRefusal turns a gate's refusal (an error reply the gate raises: see
// gateLua) into our error: a *SettingsError, ErrUnplanted, or err as it
// was. Redis may add words after the gate's ("script: ..."), so only the
// first two words are read.
func gateRefusal(err error, ours Settings) error {
	re, ok := rueidis.IsRedisErr(err)
	if !ok {
		return err
	}
	words := strings.Fields(re.Error())
	switch {
	case len(words) >= 2 && words[0] == "SETTINGS":
		return &SettingsError{Ours: ours, Recorded: ParseSettings(words[1])}
	case len(words) >= 1 && words[0] == "UNPLANTED":
		return ErrUnplanted
	}
	return err
}

// settingsRefusals counts the errors of errs that are a master's
// SettingsError, and returns the one whose recorded settings most of them
// share.
func settingsRefusals(errs []error) (common *SettingsError, count, same int) {
	byRecorded := map[string]int{}
	for _, err := range errs {
		var se *SettingsError
		if !errors.As(err, &se) {
			continue
		}
		count++
		key := se.Recorded.String()
		byRecorded[key]++
		if byRecorded[key] > same {
			common, same = se, byRecorded[key]
		}
	}
	return common, count, same
}

// SettingsProblem says, while a majority of masters records other settings
// than this agent's (as its probes saw them), how they differ: a
// *RoundError of ErrSettings, whose text names the settings, ours and the
// cluster's, and on how many masters. Nil otherwise.
func (c *Cluster) SettingsProblem() error {
	var errs []error
	for _, m := range c.masters {
		m.mu.RLock()
		if errors.Is(m.refusal, ErrSettings) {
			errs = append(errs, &MasterError{m.cfg.Name, m.refusal})
		}
		m.mu.RUnlock()
	}
	if len(errs) <= len(c.masters)-c.quorum {
		return nil
	}
	return &RoundError{Kind: ErrSettings, Needed: c.quorum, Masters: errs, Size: len(c.masters)}
}

// noteSettings logs when a majority of masters starts or stops recording
// other settings than this agent's: while it does, the agent grants nothing.
func (c *Cluster) noteSettings() {
	problem := c.SettingsProblem()
	if c.settingsDiffer.Swap(problem != nil) == (problem != nil) {
		return
	}
	if problem != nil {
		c.cfg.Logger.Error("this agent's settings differ from those a majority of masters records: it grants nothing until they agree (see lock-agent settings)",
			"differ", problem.Error(), "settings", c.settings)
		return
	}
	c.cfg.Logger.Info("a majority of masters records this agent's settings again", "settings", c.settings)
}

// settingsKind says whether the masters' errors alone rule out a majority
// because they record other settings: then a round that failed fails with
// ErrSettings, not ErrNoQuorum.
func (c *Cluster) settingsKind(errs []error) bool {
	_, count, _ := settingsRefusals(errs)
	return count > len(c.masters)-c.quorum
}
