// Package systemd is how the agent runs as a systemd service: sd_notify(3)
// (readiness, status, the watchdog, stopping) and socket activation
// (sd_listen_fds(3)). Without systemd both do nothing.
package systemd

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/hashicorp/go-hclog"
)

// How often the Notifier looks at the agent, and how often STATUS= is
// refreshed when only the counts changed. A change of quorum or of health is
// sent at the next look.
const (
	notifyPoll  = 250 * time.Millisecond
	statusEvery = 2 * time.Second
)

// Notifier tells systemd how the agent is doing (sd_notify(3)), for a
// Type=notify service:
//   - READY=1 once the socket listens and a quorum of masters is up, or
//     after readyTimeout without one (then STATUS= says "no quorum");
//   - STATUS= with the masters up, the quorum, sessions, holds and waiters,
//     at once when the quorum or the agent's health changes, else at most
//     every few seconds;
//   - WATCHDOG=1 every half WATCHDOG_USEC, but only while the agent's own
//     loops turn (see Agent.Healthy): a wedged agent is restarted;
//   - STOPPING=1 when its context ends.
//
// Without NOTIFY_SOCKET it sends nothing.
type Notifier struct {
	agent        Agent
	readyTimeout time.Duration
	log          hclog.Logger

	failing bool // the last send failed: the next failure is not logged again
}

// Agent is what a Notifier watches (an *agent.Agent).
type Agent interface {
	// Ready is closed once the socket listens.
	Ready() <-chan struct{}
	// Stats is a snapshot of the masters and the load.
	Stats() Stats
	// Healthy is nil while the agent's own loops turn.
	Healthy() error
}

// Stats is a snapshot of the agent's masters and load.
type Stats struct {
	Masters   int // configured
	MastersUp int // up and voting
	Quorum    int // how many must agree
	Sessions  int
	Holds     int
	Waiters   int
}

// HasQuorum reports whether enough masters are up to grant a lock.
func (s Stats) HasQuorum() bool { return s.MastersUp >= s.Quorum }

// NewNotifier returns a Notifier for a that sends READY=1 without a quorum
// once readyTimeout has passed (systemd.ready_timeout); Run makes it work.
func NewNotifier(a Agent, readyTimeout time.Duration, log hclog.Logger) *Notifier {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Notifier{agent: a, readyTimeout: readyTimeout, log: log}
}

// Run notifies systemd until ctx ends, then sends STOPPING=1. It returns
// nil; without NOTIFY_SOCKET it only waits for ctx.
func (n *Notifier) Run(ctx context.Context) error {
	if os.Getenv("NOTIFY_SOCKET") == "" {
		<-ctx.Done()
		return nil
	}
	select {
	case <-n.agent.Ready():
	case <-ctx.Done():
		n.send(daemon.SdNotifyStopping)
		return nil
	}
	ping, stopPing := n.watchdog()
	defer stopPing()
	readyBy := time.NewTimer(n.readyTimeout)
	defer readyBy.Stop()
	poll := time.NewTicker(notifyPoll)
	defer poll.Stop()

	var seen seen
	for {
		stats := n.look(&seen)
		select {
		case <-ctx.Done():
			n.send(fmt.Sprintf("%s\nSTATUS=stopping: releasing holds=%d of sessions=%d", daemon.SdNotifyStopping, stats.Holds, stats.Sessions))
			return nil
		case <-readyBy.C:
			seen.timedOut = true
		case <-poll.C:
		case <-ping:
			if n.agent.Healthy() == nil {
				n.send(daemon.SdNotifyWatchdog)
			}
		}
	}
}

// watchdog returns a channel that ticks every half WATCHDOG_USEC, or nil
// (it never ticks) when systemd's watchdog is off, and what stops it.
func (n *Notifier) watchdog() (<-chan time.Time, func()) {
	interval, err := daemon.SdWatchdogEnabled(false)
	if err != nil {
		n.log.Warn("systemd watchdog: WATCHDOG_USEC ignored", "error", err)
	}
	if interval <= 0 {
		return nil, func() {}
	}
	t := time.NewTicker(interval / 2)
	n.log.Debug("systemd watchdog on", "interval", interval)
	return t.C, t.Stop
}

// seen is what Run remembers between its looks at the agent.
type seen struct {
	ready, timedOut bool // READY=1 was sent; ready_timeout has passed
	sent            status
	sentAt          time.Time
	unhealthy       error
}

// look reads the agent's stats and health, logs a change of health, and
// sends READY=1 once due, or STATUS= when it changed; it returns the stats.
func (n *Notifier) look(seen *seen) Stats {
	stats, unhealthy := n.agent.Stats(), n.agent.Healthy()
	switch {
	case unhealthy != nil && seen.unhealthy == nil:
		n.log.Error("a loop of the agent is wedged: no more WATCHDOG=1, systemd will restart the agent", "error", unhealthy)
	case unhealthy == nil && seen.unhealthy != nil:
		n.log.Info("the agent's loops turn again: WATCHDOG=1 resumes")
	}
	seen.unhealthy = unhealthy
	now := statusOf(stats, unhealthy)
	switch {
	case !seen.ready && (stats.HasQuorum() || seen.timedOut):
		seen.ready = true
		if !stats.HasQuorum() {
			n.log.Warn("no quorum of masters after systemd.ready_timeout: ready anyway", "ready_timeout", n.readyTimeout,
				"masters_up", stats.MastersUp, "quorum", stats.Quorum)
		}
		n.send(daemon.SdNotifyReady + "\nSTATUS=" + now.text)
		seen.sent, seen.sentAt = now, time.Now()
	case now.urgent != seen.sent.urgent || (now.text != seen.sent.text && time.Since(seen.sentAt) >= statusEvery):
		n.send("STATUS=" + now.text)
		seen.sent, seen.sentAt = now, time.Now()
	}
	return stats
}

// status is one STATUS= line, and what in it must reach systemd at once:
// the masters up and the health; the rest waits for statusEvery.
type status struct {
	text   string
	urgent string
}

func statusOf(s Stats, unhealthy error) status {
	text := fmt.Sprintf("quorum: %d/%d masters up (%d needed)", s.MastersUp, s.Masters, s.Quorum)
	if !s.HasQuorum() {
		text = "no " + text
	}
	if unhealthy != nil {
		text = "unhealthy: " + unhealthy.Error() + "; " + text
	}
	text += fmt.Sprintf("; sessions=%d holds=%d waiters=%d", s.Sessions, s.Holds, s.Waiters)
	return status{text: text, urgent: fmt.Sprint(s.MastersUp, unhealthy != nil)}
}

// send sends one sd_notify message; a failure is logged once until a send
// works again.
func (n *Notifier) send(state string) {
	_, err := daemon.SdNotify(false, state)
	switch {
	case err != nil && !n.failing:
		n.log.Warn("cannot notify systemd", "socket", os.Getenv("NOTIFY_SOCKET"), "error", err)
	case err == nil && n.failing:
		n.log.Info("notifying systemd again")
	}
	n.failing = err != nil
}
