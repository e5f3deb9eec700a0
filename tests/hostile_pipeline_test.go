package tests

import (
	"bufio"
	"fmt"
	"math/rand"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// pipeReq is one request of a pipelined storm on one connection.
type pipeReq struct {
	tag, verb, name, owner string
	target                 string // for CANCEL: the LOCK's tag
}

// pipeReply is a final reply, in the order the connection read it.
type pipeReply struct {
	tag, kind, code string
	fields          map[string]string
	at              int
}

// stormLines builds n requests on a few holds (each name has one owner on
// this connection, so the holds' counts follow from the lines and the
// LOCKs' outcomes alone).
func stormLines(rng *rand.Rand, n int) []pipeReq {
	var reqs []pipeReq
	var locks []string
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("p%d", rng.Intn(3))
		owner := "o" + name
		tag := fmt.Sprintf("t%d", i)
		r := pipeReq{tag: tag, name: name, owner: owner}
		switch x := rng.Intn(100); {
		case x < 35:
			r.verb = "LOCK"
			locks = append(locks, tag)
		case x < 65:
			r.verb = "UNLOCK"
		case x < 80:
			r.verb = "EXTEND"
		case x < 90:
			r.verb = "WHO"
		case len(locks) > 0:
			r.verb, r.target = "CANCEL", locks[rng.Intn(len(locks))]
		default:
			r.verb = "HOLDS"
		}
		reqs = append(reqs, r)
	}
	return reqs
}

func (r pipeReq) line() string {
	switch r.verb {
	case "LOCK":
		return fmt.Sprintf("%s LOCK %s owner=%s wait=forever", r.tag, r.name, r.owner)
	case "UNLOCK":
		return fmt.Sprintf("%s UNLOCK %s owner=%s", r.tag, r.name, r.owner)
	case "EXTEND":
		return fmt.Sprintf("%s EXTEND %s owner=%s ttl=30s", r.tag, r.name, r.owner)
	case "WHO":
		return fmt.Sprintf("%s WHO %s", r.tag, r.name)
	case "CANCEL":
		return fmt.Sprintf("%s CANCEL %s", r.tag, r.target)
	}
	return r.tag + " HOLDS"
}

// readFinals reads final replies until want of them came or the
// connection ends, in order.
func readFinals(conn net.Conn, want int, within time.Duration) (map[string]pipeReply, []string) {
	conn.SetReadDeadline(time.Now().Add(within))
	got := map[string]pipeReply{}
	var odd []string
	rd := bufio.NewReader(conn)
	for n := 0; len(got) < want; {
		line, err := rd.ReadString('\n')
		if err != nil {
			odd = append(odd, "read: "+err.Error())
			break
		}
		w := strings.Fields(line)
		if len(w) < 2 || w[0] == "*" || w[1] == "DATA" {
			continue
		}
		if _, dup := got[w[0]]; dup {
			odd = append(odd, "second final reply: "+line)
		}
		r := pipeReply{tag: w[0], kind: w[1], fields: map[string]string{}, at: n}
		if r.kind == "ERR" && len(w) > 2 {
			r.code = w[2]
		}
		for _, f := range w[2:] {
			if k, v, ok := strings.Cut(f, "="); ok {
				r.fields[k] = v
			}
		}
		got[w[0]], n = r, n+1
	}
	return got, odd
}

// checkStorm replays the lines in order against the replies: each hold's
// count follows its LOCKs (OK or CANCELLED) and UNLOCKs, and a request
// after a LOCK of its hold answers after that LOCK.
func checkStorm(t *testing.T, reqs []pipeReq, got map[string]pipeReply) {
	t.Helper()
	count := map[string]int{}
	lastLock := map[string]pipeReply{}
	for _, q := range reqs {
		r, ok := got[q.tag]
		if !ok {
			t.Errorf("%s: no reply", q.line())
			continue
		}
		cancelled := r.kind == "ERR" && r.code == "CANCELLED"
		if l, ok := lastLock[q.name]; ok && !cancelled && q.verb != "CANCEL" && q.verb != "HOLDS" && r.at < l.at {
			t.Errorf("%s answered (#%d) before the LOCK %s before it (#%d)", q.line(), r.at, l.tag, l.at)
		}
		switch q.verb {
		case "LOCK":
			if !cancelled {
				lastLock[q.name] = r
			}
			switch {
			case r.kind == "OK" && r.fields["count"] == fmt.Sprint(count[q.name]+1):
				count[q.name]++
			case r.kind == "ERR" && r.code == "CANCELLED":
			default:
				t.Errorf("%s: %s %s %v with count %d held", q.line(), r.kind, r.code, r.fields, count[q.name])
			}
		case "UNLOCK":
			if count[q.name] == 0 {
				if r.code != "NOT_HELD" {
					t.Errorf("%s: %s %s %v, want NOT_HELD", q.line(), r.kind, r.code, r.fields)
				}
				continue
			}
			count[q.name]--
			if r.kind != "OK" || r.fields["count"] != fmt.Sprint(count[q.name]) {
				t.Errorf("%s: %s %s %v, want count=%d", q.line(), r.kind, r.code, r.fields, count[q.name])
			}
		case "EXTEND":
			if (count[q.name] > 0) != (r.kind == "OK") {
				t.Errorf("%s: %s %s %v with count %d held", q.line(), r.kind, r.code, r.fields, count[q.name])
			}
		default:
			if r.kind != "OK" {
				t.Errorf("%s: %s %s %v", q.line(), r.kind, r.code, r.fields)
			}
		}
	}
}

// TestHostilePipelineStorm: thousands of pipelined LOCK, UNLOCK, EXTEND,
// WHO, CANCEL and HOLDS on three holds of one connection, while another
// connection takes the names now and then: every request is answered
// once, as the lines in order say, and nothing is left held.
func TestHostilePipelineStorm(t *testing.T) {
	t.Parallel() // its own masters and agents; judges no latency
	servers := redistest.Start(t, 3)
	cfg := agenttest.Config(t, servers, 2*time.Second)
	cfg.Limits.MaxHoldsPerSession = 100000
	a := agenttest.Start(t, cfg)
	for seed := int64(1); seed <= 3; seed++ {
		rng := rand.New(rand.NewSource(seed))
		reqs := stormLines(rng, 3000)
		other := agenttest.Dial(t, a.Config.Socket.Path)
		stop := make(chan struct{})
		otherDone := make(chan struct{})
		go func() {
			defer close(otherDone)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("p%d", i%3)
				if r := other.Do("LOCK " + name + " wait=0"); r.Kind == "OK" {
					other.Do("UNLOCK " + name)
				}
			}
		}()
		conn, err := net.Dial("unix", a.Config.Socket.Path)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, q := range reqs {
			b.WriteString(q.line() + "\n")
		}
		go conn.Write([]byte(b.String()))
		got, odd := readFinals(conn, len(reqs), 60*time.Second)
		close(stop)
		<-otherDone
		for _, o := range odd {
			t.Errorf("seed %d: %s", seed, o)
		}
		checkStorm(t, reqs, got)
		conn.Close()
		c := agenttest.Dial(t, a.Config.Socket.Path)
		lockagenttest.Eventually(t, 5*time.Second, func() bool { return c.Do("STATUS").Int("holds") == 0 },
			"seed %d: the agent still has holds after the storm's connection closed", seed)
		for i := 0; i < 3; i++ {
			if r := c.Do(fmt.Sprintf("LOCK p%d wait=5s", i)); r.Kind != "OK" {
				t.Fatalf("seed %d: p%d after the storm: %s", seed, i, r.Line)
			}
			c.Do(fmt.Sprintf("UNLOCK p%d", i))
		}
	}
}

// TestHostilePipelineClosedMidway: a storm's connection closes after a
// few replies, with LOCKs waiting for their turn, joining queues and
// held: the agent ends up with no hold, no waiter and no session, and the
// names are free.
func TestHostilePipelineClosedMidway(t *testing.T) {
	t.Parallel() // see TestMain
	servers := redistest.Start(t, 3)
	cfg := agenttest.Config(t, servers, 2*time.Second)
	cfg.Limits.MaxHoldsPerSession = 100000
	a := agenttest.Start(t, cfg)
	c := agenttest.Dial(t, a.Config.Socket.Path)
	blocker := agenttest.Dial(t, a.Config.Socket.Path)
	for seed := int64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewSource(seed))
		if r := blocker.Do("LOCK p1 wait=0"); r.Kind != "OK" {
			t.Fatal(r.Line)
		}
		reqs := stormLines(rng, 2000)
		conn, err := net.Dial("unix", a.Config.Socket.Path)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, q := range reqs {
			b.WriteString(q.line() + "\n")
		}
		go conn.Write([]byte(b.String()))
		readFinals(conn, rng.Intn(200), 10*time.Second)
		conn.Close()
		blocker.Do("UNLOCK p1")
		var st agenttest.Reply
		lockagenttest.Eventually(t, 5*time.Second, func() bool {
			st = c.Do("STATUS")
			return st.Int("holds") == 0 && st.Int("waiters") == 0 && st.Int("sessions") == 2
		}, "seed %d: after the storm's connection closed: %+v", seed, &st)
		for i := 0; i < 3; i++ {
			if r := c.Do(fmt.Sprintf("LOCK p%d wait=0", i)); r.Kind != "OK" {
				t.Fatalf("seed %d: p%d after the storm: %s", seed, i, r.Line)
			}
			c.Do(fmt.Sprintf("UNLOCK p%d", i))
		}
	}
}
