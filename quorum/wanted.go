package quorum

import (
	"context"
	"strconv"
	"strings"
)

// Want is what an agent whose waiter found a name held says on the name's
// channel (see Cluster.Wanted): whether that waiter wants the name shared
// (a shared holder is then not in its way), and how many requests for the
// name wait on that agent. A holder's agent reads it from its Watch
// (Watch.Wants) to tell holders that asked that they are wanted.
type Want struct {
	Shared bool
	Count  int
}

// message is want as instance says it: "wanted INSTANCE MODE COUNT".
func (w Want) message(instance string) string {
	mode := "exclusive"
	if w.Shared {
		mode = "shared"
	}
	return wantedPrefix + instance + " " + mode + " " + strconv.Itoa(max(w.Count, 1))
}

// parseWant reads a wanted message. One that names only its instance (an
// agent from before Want) wants the name exclusively, with one waiter.
func parseWant(message string) (instance string, w Want, ok bool) {
	f := strings.Fields(strings.TrimPrefix(message, wantedPrefix))
	if len(f) == 0 {
		return "", w, false
	}
	w = Want{Count: 1}
	if len(f) >= 3 {
		w.Shared = f[1] == "shared"
		if n, err := strconv.Atoi(f[2]); err == nil && n > 0 {
			w.Count = n
		}
	}
	return f[0], w, true
}

// Wanted tells the agents that hold name, if they watch the name, that
// this agent has requests waiting for it, as want says: an agent that
// passes a name among its local holders (see AcquireRequest.FenceBlock)
// then gives it up within its bounds, and one whose holder asked to be
// told (notify=wanted) tells it. It publishes on every connected master,
// in the background, and returns at once; a message can be lost (a master
// down, or the holder's subscription not yet made), so it is a hint,
// never a fact to be safe by.
func (c *Cluster) Wanted(name string, want Want) {
	if c.closed() {
		return
	}
	ch, message := c.keys.Channel(name), want.message(c.cfg.InstanceID)
	c.goBackground(func() {
		c.eachMaster(context.Background(), func(ctx context.Context, m *master) {
			m.publish(ctx, ch, message)
		})
	})
}

// heardWanted hands a wanted message of another agent to the name's
// watches: not a release, it must not wake waiters, whose attempts would
// fail and say so again. This agent's own messages are dropped.
func (c *Cluster) heardWanted(channel, message string) {
	instance, want, ok := parseWant(message)
	if !ok || instance == c.cfg.InstanceID {
		return
	}
	c.watchMu.Lock()
	defer c.watchMu.Unlock()
	for w := range c.watches[channel].all() {
		if w.wants == nil {
			w.wants = map[string]Want{}
		}
		w.wants[instance] = want
		signal(w.wanted)
	}
}

// Wants returns what other agents said of their waiters (see Want) since
// the last call, by agent instance, the latest of each; nil if nothing.
// Watch.Wanted receives when there is something.
func (w *Watch) Wants() map[string]Want {
	w.c.watchMu.Lock()
	defer w.c.watchMu.Unlock()
	wants := w.wants
	w.wants = nil
	return wants
}

// Held tells the agents that wait for name that a client of this agent
// holds it: a record they found in their way that this agent keeps as a
// cache (see Refusal.OnlyKept) is lent, not free, so a wait=0 try need
// not wait for its release. It publishes on every connected master, in
// the background, and returns at once; like Wanted it is a hint: a try
// that misses it answers BUSY after its bounded wait.
func (c *Cluster) Held(name string) {
	if c.closed() {
		return
	}
	ch, message := c.keys.Channel(name), heldPrefix+c.cfg.InstanceID
	c.goBackground(func() {
		c.eachMaster(context.Background(), func(ctx context.Context, m *master) {
			m.publish(ctx, ch, message)
		})
	})
}

// heardHeld signals the Held channel of the name's watches, but for this
// agent's own messages.
func (c *Cluster) heardHeld(channel, message string) {
	if strings.TrimPrefix(message, heldPrefix) == c.cfg.InstanceID {
		return
	}
	c.watchMu.Lock()
	defer c.watchMu.Unlock()
	for w := range c.watches[channel].all() {
		signal(w.held)
	}
}
