package quorum

import (
	"context"
	"errors"
	"strconv"
	"time"
)

// Bootstrap is BootstrapSettings recording no settings: the first agent
// that may records its own (see gateLua).
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
		v, err := m.eval(ctx, bootstrapScript, []string{c.markerKey()}, []string{"bootstrap:" + randomID(), c.settings}).AsInt64()
		if err == nil && v > 0 {
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
		vals, err := m.conn(laneRounds).Do(ctx, m.conn(laneRounds).B().Hmget().Key(c.markerKey()).Field("epoch", "settings").Build()).ToArray()
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
// changeSrc. It is the settings command, the safe way to change a setting
// on a running cluster: during the quarantine no agent grants (the old
// agents' renewals are refused, so their holds are lost, and their records
// expire within one old lease); agents restarted with the new settings vote
// once it ends. quarantine must be at least the old settings' and the new
// ones' quarantine. It returns the names of the masters it changed; a
// master it could not reach keeps the old settings, and agents with the new
// ones plant it anew once they are a majority (see markerSrc).
func ChangeSettings(ctx context.Context, keyPrefix string, settings Settings, quarantine time.Duration, masters []MasterConfig) ([]string, error) {
	if len(settings) == 0 {
		return nil, errors.New("quorum: no settings to record")
	}
	var changed []string
	err := eachAdmin(keyPrefix, settings, masters, func(c *Cluster, m *master) error {
		err := m.eval(ctx, changeScript, []string{c.markerKey()},
			[]string{"change:" + randomID(), c.settings, strconv.FormatInt(quarantine.Milliseconds(), 10)}).Error()
		if err == nil {
			changed = append(changed, m.cfg.Name)
		}
		return err
	})
	return changed, err
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
		m.connect()
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
