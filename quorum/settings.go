package quorum

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/lock-agent/lock-agent/quorum/scripts"
	"github.com/redis/rueidis"
)

// Settings are the settings that the safety of a cluster's agents depends
// on (the lease, the drift allowance, the quarantine they imply, the cohort
// bounds: the agent chooses them, see agent.ClusterSettings). Every master's
// epoch marker records them (see scripts/lua/gate.lua), and a master votes only for an
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

// settingsRefusals returns what each error of errs that is a master's
// SettingsError records, and this agent's settings (those of the first).
func settingsRefusals(errs []error) (ours Settings, recorded []Settings) {
	for _, err := range errs {
		var se *SettingsError
		if errors.As(err, &se) {
			ours, recorded = se.Ours, append(recorded, se.Recorded)
		}
	}
	return ours, recorded
}

// mostRecorded returns the settings that most of recorded are (the first
// of those tied), and how many are.
func mostRecorded(recorded []Settings) (common Settings, same int) {
	count := map[string]int{}
	for _, r := range recorded {
		key := r.String()
		if count[key]++; count[key] > same {
			common, same = r, count[key]
		}
	}
	return common, same
}

// DescribeRefusals says how ours differs from the settings most of
// recorded share (what each master that refuses this agent records), and
// on how many of size masters (size 0: not said), e.g. "lease=20s here,
// the masters record lease=1s (on 2 of 3)". It is ERR SETTINGS's text,
// and lock-agent status says it from STATUS's lines.
func DescribeRefusals(ours Settings, recorded []Settings, size int) string {
	if len(recorded) == 0 {
		return "settings differ from the cluster's"
	}
	common, same := mostRecorded(recorded)
	verb := "the masters record"
	if same == 1 {
		verb = "the master records"
	}
	msg := DescribeDiff(ours, common, verb)
	if size > 0 {
		return fmt.Sprintf("%s (on %d of %d)", msg, same, size)
	}
	return fmt.Sprintf("%s (on %d)", msg, same)
}

// SettingsDiffOf lists the settings that differ between this agent's and
// those most masters that refused it in err (a *RoundError, as
// Cluster.SettingsProblem returns) record: the settings DescribeRefusals
// names. Nil if err has no such refusal.
func SettingsDiffOf(err error) []SettingDiff {
	var re *RoundError
	if !errors.As(err, &re) {
		return nil
	}
	ours, recorded := settingsRefusals(re.Masters)
	if len(recorded) == 0 {
		return nil
	}
	common, _ := mostRecorded(recorded)
	return ours.Diff(common)
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
	_, recorded := settingsRefusals(errs)
	return len(recorded) > len(c.masters)-c.quorum
}

// Bootstrap is BootstrapSettings recording no settings: the first agent
// that may records its own (see scripts/lua/gate.lua).
func Bootstrap(ctx context.Context, keyPrefix string, masters []MasterConfig) ([]string, error) {
	return BootstrapSettings(ctx, keyPrefix, nil, masters)
}

// BootstrapSettings plants an epoch marker with no quarantine, recording
// settings, on each of masters that has none (and records settings in a
// marker there that records none), and returns the names of those it
// planted or recorded on. It is for masters known to be new, that never
// served a lock (the -dev masters, a new deployment): a master that lost
// its data looks the same, and bootstrapping it instead of letting it sit
// out its quarantine can grant a name that a forgotten hold still protects.
func BootstrapSettings(ctx context.Context, keyPrefix string, settings Settings, masters []MasterConfig) ([]string, error) {
	var planted []string
	err := eachAdmin(keyPrefix, settings, masters, func(c *Cluster, m *master) error {
		epoch := "bootstrap:" + randomID()
		plantedHere, err := m.eachMarker(ctx, scripts.Bootstrap, func(r rueidis.RedisResult) (bool, error) {
			v, err := r.AsInt64()
			return v > 0, err
		}, epoch, c.settings)
		if plantedHere {
			planted = append(planted, m.cfg.Name)
		}
		return err
	})
	return planted, err
}

// MarkerSettings are what one master's marker records, as ReadSettings
// reads it.
type MarkerSettings struct {
	Master string
	// Marked says the master has a marker; Settings are what it records
	// (nil: none).
	Marked   bool
	Settings Settings
}

// ReadSettings reads what each of masters' markers records, for the
// masters it could read (the error names the others).
func ReadSettings(ctx context.Context, keyPrefix string, masters []MasterConfig) ([]MarkerSettings, error) {
	var out []MarkerSettings
	err := eachAdmin(keyPrefix, nil, masters, func(c *Cluster, m *master) error {
		key := m.t.settingsMarker()
		vals, err := m.conn(laneRounds).Do(ctx, m.conn(laneRounds).B().Hmget().Key(key).Field("epoch", "settings").Build()).ToArray()
		if err != nil {
			return err
		}
		epoch, _ := vals[0].ToString()
		recorded, _ := vals[1].ToString()
		out = append(out, MarkerSettings{Master: m.cfg.Name, Marked: epoch != "", Settings: ParseSettings(recorded)})
		return nil
	})
	return out, err
}

// ChangeSettings records settings in every one of masters' markers, with a
// quarantine of quarantine from now (or longer, where one ends later): see
// scripts/lua/change.lua. It is the settings command, the safe way to change a setting
// on a running cluster: during the quarantine no agent grants (the old
// agents' renewals are refused, so their holds are lost, and their records
// expire within one old lease); agents restarted with the new settings vote
// once it ends. quarantine must be at least the old settings' and the new
// ones' quarantine. It returns the names of the masters it changed; a
// master it could not reach keeps the old settings, and agents with the new
// ones plant it anew once they are a majority (see scripts/lua/marker.lua).
func ChangeSettings(ctx context.Context, keyPrefix string, settings Settings, quarantine time.Duration, masters []MasterConfig) ([]string, error) {
	if len(settings) == 0 {
		return nil, errors.New("quorum: no settings to record")
	}
	var changed []string
	err := eachAdmin(keyPrefix, settings, masters, func(c *Cluster, m *master) error {
		_, err := m.eachMarker(ctx, scripts.Change, func(r rueidis.RedisResult) (bool, error) { return true, r.Error() },
			"change:"+randomID(), c.settings, strconv.FormatInt(quarantine.Milliseconds(), 10))
		if err == nil {
			changed = append(changed, m.cfg.Name)
		}
		return err
	})
	return changed, err
}

// eachMarker runs s with args on the master's marker, or on every slot's
// marker of a master that is a Redis Cluster, and reads each reply with
// read: it says whether any reply read true, and joins the errors.
func (m *master) eachMarker(ctx context.Context, s *scripts.Script, read func(rueidis.RedisResult) (bool, error), args ...string) (some bool, err error) {
	replies := m.t.markerReplies(ctx, s, args)
	var errs []error
	for _, r := range replies {
		ok, err := read(r)
		some = some || (ok && err == nil)
		if err != nil && len(errs) < 3 { // the same error on every slot says nothing more
			errs = append(errs, err)
		}
	}
	return some, errors.Join(errs...)
}

// eachAdmin connects to each of masters in turn, runs f on it, and closes
// it: for the commands an operator runs, not an agent. The error joins
// each master's that failed.
func eachAdmin(keyPrefix string, settings Settings, masters []MasterConfig, f func(*Cluster, *master) error) error {
	c, err := New(Config{Masters: masters, KeyPrefix: keyPrefix, Settings: settings})
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range c.masters {
		m.connect(context.Background())
		if m.getClient() == nil {
			errs = append(errs, &MasterError{m.cfg.Name, m.lastErr})
			continue
		}
		if err := f(c, m); err != nil {
			errs = append(errs, &MasterError{m.cfg.Name, err})
		}
		m.close()
	}
	return errors.Join(errs...)
}
