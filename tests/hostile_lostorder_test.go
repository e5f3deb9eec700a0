package tests

import (
	"bufio"
	"fmt"
	"math/rand"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// TestHostileLostComesBeforeWhatDependsOnIt races a ttl= hold's end
// against the requests that look it up (docs/protocol.md, ordering rule
// 3): an UNLOCK or EXTEND answered NOT_HELD, and a LOCK of the name that
// is a new acquisition (count=1), come after the hold's * LOST on the
// connection; a hold that was UNLOCKed is never LOST after.
func TestHostileLostComesBeforeWhatDependsOnIt(t *testing.T) {
	t.Parallel() // see TestMain
	servers := redistest.Start(t, 3)
	a := agenttest.Start(t, agenttest.Config(t, servers, time.Second))
	conn, err := net.Dial("unix", a.Config.Socket.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rd := bufio.NewReader(conn)
	next := func() []string {
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		return strings.Fields(line)
	}
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 150; i++ {
		fmt.Fprintf(conn, "l%d LOCK k ttl=50ms\n", i)
		w := next()
		if w[1] != "OK" || !strings.Contains(strings.Join(w, " "), "count=1") {
			t.Fatalf("round %d: LOCK: %v", i, w)
		}
		time.Sleep(time.Duration(40+rng.Intn(20)) * time.Millisecond) // aim at the hold's end: the race is the point
		verb := []string{"UNLOCK k", "EXTEND k ttl=100ms", "LOCK k"}[i%3]
		fmt.Fprintf(conn, "r%d %s\n", i, verb)
		lost, answered, released := false, false, false
		for !answered || (!lost && !released) {
			w := next()
			if w[0] == "*" {
				if lost || released {
					t.Fatalf("round %d: push %v after the LOST or the release", i, w)
				}
				lost = true
				continue
			}
			line := strings.Join(w, " ")
			notHeld := strings.Contains(line, "NOT_HELD")
			switch {
			case verb != "LOCK k" && notHeld && !lost:
				t.Fatalf("round %d: %s answered %q before the LOST", i, verb, line)
			case verb == "LOCK k" && strings.Contains(line, "count=1") && !lost:
				t.Fatalf("round %d: %s answered %q (a new hold) before the LOST", i, verb, line)
			}
			answered = true
			// an UNLOCK that released, or a LOCK that made a new hold after the LOST: nothing more to hear of the old hold
			released = (verb == "UNLOCK k" && !notHeld) || (verb == "LOCK k" && lost)
		}
		// whatever is held now: let go of it, so the next round starts with nothing
		fmt.Fprintf(conn, "u%d UNLOCK k\n", i)
		for {
			w := next()
			if w[0] == "u"+fmt.Sprint(i) {
				break
			}
		}
	}
}
