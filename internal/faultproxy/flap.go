package faultproxy

import (
	"context"
	"time"
)

// Flap switches p between mode (for on) and Pass (for off), starting with
// mode, until ctx ends; it leaves the link in Pass. A flapping link is the
// hardest to judge: each outage is too short to mark the master down, yet
// rounds that meet one fail or stall.
func (p *Proxy) Flap(ctx context.Context, mode Mode, on, off time.Duration) {
	defer p.SetMode(Pass)
	next, d := mode, on
	for {
		p.SetMode(next)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if next == Pass {
			next, d = mode, on
		} else {
			next, d = Pass, off
		}
	}
}
