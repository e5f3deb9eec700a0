package agent_test

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/agent"
	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/agenttest"
)

// hostileScript is a session's pipelined requests: LOCKs of few names
// (single and multi, short waits, forever waits, fair), CANCELs of earlier
// tags, UNLOCKs.
func hostileScript(rng *rand.Rand, sess, n int) (lines []string, tags []string) {
	names := []string{"n0", "n1", "n2", "n3"}
	waits := []string{"wait=0", "wait=1ms", "wait=2ms", "wait=20ms", "wait=forever", ""}
	for i := range n {
		tag := fmt.Sprintf("s%dr%d", sess, i)
		owner := fmt.Sprintf("o%d", rng.IntN(3))
		var line string
		switch k := rng.IntN(10); {
		case k < 4:
			line = fmt.Sprintf("LOCK %s owner=%s %s", names[rng.IntN(len(names))], owner, waits[rng.IntN(len(waits))])
			if rng.IntN(4) == 0 {
				line += " fair=true"
			}
		case k < 5:
			a, b := rng.IntN(len(names)), rng.IntN(len(names))
			if a == b {
				b = (a + 1) % len(names)
			}
			line = fmt.Sprintf("LOCK %s %s owner=%s %s", names[a], names[b], owner, waits[rng.IntN(len(waits))])
		case k < 7 && i > 0:
			line = fmt.Sprintf("CANCEL s%dr%d", sess, rng.IntN(i))
		default:
			line = fmt.Sprintf("UNLOCK %s owner=%s", names[rng.IntN(len(names))], owner)
		}
		lines = append(lines, tag+" "+line)
		tags = append(tags, tag)
	}
	return lines, tags
}

// TestEveryPipelinedRequestIsAnsweredOnceWhateverEndsItsSession: sessions
// pipeline LOCKs (of one name and of several; wait=0, 1ms, 20ms, forever;
// fair), CANCELs of earlier tags and UNLOCKs on a few names, then end with
// QUIT, a half-close or a hang-up while their waits end by grants, hand-overs,
// timers and CANCEL. Every request of a session that said QUIT or half-closed
// gets exactly one answer before the agent closes the connection, and once
// every session has closed nothing is held or waiting, here or in the masters.
func TestEveryPipelinedRequestIsAnsweredOnceWhateverEndsItsSession(t *testing.T) {
	a, _ := start(t, nil)
	const sessions, requests = 8, 300
	var wg sync.WaitGroup
	for round := range 3 {
		for sess := range sessions {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(round), uint64(sess)))
				lines, tags := hostileScript(rng, sess, requests)
				nc, err := net.Dial("unix", a.Config.Socket.Path)
				if err != nil {
					t.Error(err)
					return
				}
				defer nc.Close()
				got := map[string]int{}
				done := make(chan struct{})
				go func() {
					defer close(done)
					r := bufio.NewReader(nc)
					for {
						line, err := r.ReadString('\n')
						if err != nil {
							return
						}
						w := strings.Fields(line)
						if len(w) < 2 || w[0] == "*" || w[1] == "DATA" {
							continue
						}
						got[w[0]]++
					}
				}()
				// Pipelined in a few writes, with pauses, then ended in one
				// of the ways a client ends.
				for len(lines) > 0 {
					k := min(len(lines), 1+rng.IntN(50))
					nc.Write([]byte(strings.Join(lines[:k], "\n") + "\n"))
					lines = lines[k:]
					time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond)
				}
				switch sess % 3 {
				case 0:
					nc.Write([]byte("q QUIT\n"))
				case 1:
					nc.(*net.UnixConn).CloseWrite()
				case 2:
					time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
					nc.Close()
					<-done
					return
				}
				select {
				case <-done:
				case <-time.After(10 * time.Second):
					t.Errorf("session %d round %d: the agent never closed the connection", sess, round)
					nc.Close()
					<-done
					return
				}
				for _, tag := range tags {
					if got[tag] != 1 {
						t.Errorf("session %d round %d: %s got %d replies", sess, round, tag, got[tag])
					}
				}
			}()
		}
		wg.Wait()
		if t.Failed() {
			return
		}
	}
	c := agenttest.Dial(t, a.Config.Socket.Path)
	var r agenttest.Reply
	lockagenttest.Eventually(t, 5*time.Second, func() bool {
		r = c.Do("STATUS")
		return r.Int("holds") == 0 && r.Int("waiters") == 0 && r.Int("sessions") == 1
	}, "left behind: %s", &r.Line)
	for _, name := range []string{"n0", "n1", "n2", "n3"} {
		// No holder, and no place in the masters' queue: the waits
		// that ended left it in the background (see agent/locks/waiters.go).
		lockagenttest.Eventually(t, 5*time.Second, func() bool {
			r = c.Do("WHO " + name)
			return r.Int("n") == 0 && r.Fields["queued"] == ""
		}, "%s still held or queued for after every session closed: %s %v", name, &r.Line, &r.Data)
		if r := c.Do("LOCK " + name + " wait=0"); r.Kind != "OK" {
			t.Fatalf("%s: %s", name, r.Line)
		}
	}
}

// TestAFailedEntryDoesNotHoldUpTheName: a fair waiter's place in the masters'
// queue whose round failed (two of three masters stopped answering, so it
// stands on the third alone, or on more once they answer late) is taken out
// again. Left there, it stays queued for a heartbeat (a lease) ahead of
// every later entry: the waiter behind it is not granted the name when it
// is let go, and a LOCK ... wait=0 of a name nobody holds or waits for is
// BUSY. (A removal that misses a master, as one paused past its deadline
// may, is left to the heartbeat there, as a release is left to the lease:
// on a minority it holds up nobody.)
func TestAFailedEntryDoesNotHoldUpTheName(t *testing.T) {
	a, servers := start(t, func(cfg *agent.Config) {
		cfg.Lock.Lease = 30 * time.Second
		// No run of local holders: the waiter's contender must try the
		// masters (and make the fair LOCK's entries), not wait for
		// holder to pass it the name.
		cfg.Lock.CohortMaxHandoffs = 0
	})
	holder, waiter, fair := agenttest.Dial(t, a.SocketPath()), agenttest.Dial(t, a.SocketPath()), agenttest.Dial(t, a.SocketPath())
	if r := holder.Do("LOCK x"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	_, granted := waiter.Send("LOCK x")
	holder.AwaitWaiters(1) // a fair LOCK behind it asks for entries at once

	servers[1].Pause()
	servers[2].Pause()
	resume := func() {
		servers[1].Resume()
		servers[2].Resume()
	}
	defer resume()
	tag, cancelled := fair.Send("LOCK x fair=true")
	// m1's part of the first attempt at the entries ends at the round's
	// deadline, unanswered: with m2 paused too, the attempt failed, and its
	// entries stand on m0 (and on m1 and m2 once they read it).
	awaitMetric(t, a, 1, "lock_agent_master_op_duration_seconds", "master", "m1", "op", "enqueue")
	// Back at once: a removal that cannot land within its deadline (a
	// second) is left to the heartbeat, as a release is left to the lease.
	resume()
	if r := fair.Do("CANCEL " + tag); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	if r := fair.Await(cancelled); r.Code != "CANCELLED" {
		t.Fatal(r.Line)
	}
	holder.Do("UNLOCK x")
	if r := waiter.Await(granted); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	waiter.Do("UNLOCK x")

	// The waiter's own entry leaves in the background (and the masters may
	// be slow to answer on a busy host): well within the 30s heartbeat that
	// an entry left behind on a majority would keep the name queued.
	var r agenttest.Reply
	lockagenttest.Eventually(t, 10*time.Second, func() bool { r = fair.Do("LOCK x wait=0"); return r.Kind == "OK" },
		"x is neither held nor waited for: %s", &r.Line)
}
