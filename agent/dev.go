package agent

import (
	"context"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	"github.com/lock-agent/lock-agent/quorum"
)

// DevMasters are the embedded in-process masters of `run -dev`: miniredis
// servers on random loopback ports whose leases really expire (ClockTTL).
type DevMasters struct {
	servers []*miniredis.Miniredis
}

// StartDevMasters starts n embedded masters.
func StartDevMasters(n int) (*DevMasters, error) {
	d := &DevMasters{}
	for range n {
		m := miniredis.NewMiniRedis()
		m.ClockTTL(true)
		if err := m.StartAddr("127.0.0.1:0"); err != nil {
			d.Close()
			return nil, fmt.Errorf("dev master: %w", err)
		}
		d.servers = append(d.servers, m)
	}
	// The embedded masters are new, empty and this process's own: no hold
	// can have been granted from them, so they need not sit out a quarantine.
	var masters []quorum.MasterConfig
	for i, a := range d.Addrs() {
		masters = append(masters, quorum.MasterConfig{Name: fmt.Sprintf("dev%d", i+1), Address: a})
	}
	if _, err := quorum.Bootstrap(context.Background(), Default().Lock.KeyPrefix, masters); err != nil {
		d.Close()
		return nil, fmt.Errorf("dev master: %w", err)
	}
	return d, nil
}

// Addrs returns the masters' host:port addresses.
func (d *DevMasters) Addrs() []string {
	out := make([]string, len(d.servers))
	for i, m := range d.servers {
		out[i] = m.Addr()
	}
	return out
}

// Run keeps the masters up until ctx ends, then stops them.
func (d *DevMasters) Run(ctx context.Context) error {
	<-ctx.Done()
	d.Close()
	return nil
}

// Close stops every master. Calling it twice is safe.
func (d *DevMasters) Close() {
	for _, m := range d.servers {
		m.Close()
	}
}
