package quorum

import (
	"context"
	"errors"
)

// Bootstrap plants an epoch marker with no quarantine on each of masters
// that has none, and returns the names of those it planted on. It is for
// masters known to be new, that never served a lock (the -dev masters, a
// new deployment): a master that lost its data looks the same, and
// bootstrapping it instead of letting it sit out its quarantine can grant a
// name that a forgotten hold still protects.
func Bootstrap(ctx context.Context, keyPrefix string, masters []MasterConfig) ([]string, error) {
	c, err := New(Config{Masters: masters, KeyPrefix: keyPrefix})
	if err != nil {
		return nil, err
	}
	var planted []string
	var errs []error
	for _, m := range c.masters {
		m.connect()
		if m.getClient() == nil {
			errs = append(errs, &MasterError{m.cfg.Name, m.lastErr})
			continue
		}
		v, err := m.eval(ctx, bootstrapScript, []string{c.markerKey()}, []string{"bootstrap:" + randomID()}).AsInt64()
		m.close()
		switch {
		case err != nil:
			errs = append(errs, &MasterError{m.cfg.Name, err})
		case v == 1:
			planted = append(planted, m.cfg.Name)
		}
	}
	return planted, errors.Join(errs...)
}
