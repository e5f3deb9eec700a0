// Package devmasters is the embedded masters of `lock-agent run -dev`:
// in-process miniredis servers. It lives apart from package agent so that
// the daemon's library does not link miniredis; only the command does.
package devmasters

import (
	"context"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	"github.com/lock-agent/lock-agent/agent"
	"github.com/lock-agent/lock-agent/quorum"
)

// Masters are the embedded in-process masters of `run -dev`: miniredis
// servers on random loopback ports whose leases really expire (ClockTTL).
type Masters struct {
	servers []*miniredis.Miniredis
}

// Start starts n embedded masters.
func Start(n int) (*Masters, error) {
	d := &Masters{}
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
	if _, err := quorum.Bootstrap(context.Background(), agent.Default().Lock.KeyPrefix, masters); err != nil {
		d.Close()
		return nil, fmt.Errorf("dev master: %w", err)
	}
	return d, nil
}

// Addrs returns the masters' host:port addresses.
func (d *Masters) Addrs() []string {
	out := make([]string, len(d.servers))
	for i, m := range d.servers {
		out[i] = m.Addr()
	}
	return out
}

// Run keeps the masters up until ctx ends, then stops them.
func (d *Masters) Run(ctx context.Context) error {
	<-ctx.Done()
	d.Close()
	return nil
}

// Close stops every master. Calling it twice is safe.
func (d *Masters) Close() {
	for _, m := range d.servers {
		m.Close()
	}
}
