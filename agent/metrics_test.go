package agent_test

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/buildinfo"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// scrape is one GET /metrics of the agent's handler: its text and its
// parsed families.
type scrape struct {
	text     string
	families map[string]*dto.MetricFamily
}

func scrapeAgent(t *testing.T, a *agenttest.Agent) scrape {
	t.Helper()
	rec := httptest.NewRecorder()
	a.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", rec.Code, rec.Body)
	}
	text := rec.Body.String()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("the metrics do not parse: %v\n%s", err, text)
	}
	return scrape{text, families}
}

// value returns the value of the series name{labels} (for a histogram, its
// sample count), or -1 if there is none.
func (s scrape) value(name string, labels ...string) float64 {
	f := s.families[name]
	if f == nil {
		return -1
	}
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
next:
	for _, m := range f.GetMetric() {
		if len(m.GetLabel()) != len(want) {
			continue
		}
		for _, l := range m.GetLabel() {
			if want[l.GetName()] != l.GetValue() {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			return m.GetGauge().GetValue()
		case m.Counter != nil:
			return m.GetCounter().GetValue()
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	return -1
}

// expect checks series name{labels} has value want.
func (s scrape) expect(t *testing.T, want float64, name string, labels ...string) {
	t.Helper()
	if got := s.value(name, labels...); got != want {
		t.Errorf("%s%v = %v, want %v", name, labels, got, want)
	}
}

// awaitMetric scrapes until name{labels} reaches at least want (up to 5s).
func awaitMetric(t *testing.T, a *agenttest.Agent, want float64, name string, labels ...string) scrape {
	t.Helper()
	var s scrape
	got := 0.0
	lockagenttest.Eventually(t, 5*time.Second, func() bool { s = scrapeAgent(t, a); got = s.value(name, labels...); return got >= want },
		"%s%v never reached %v: it is %v", name, labels, want, &got)
	return s
}

// TestMetricsFollowLocksAndAnswers: each answer a client gets moves its
// counter, and the gauges follow holds and waiters as they come and go.
func TestMetricsFollowLocksAndAnswers(t *testing.T) {
	servers := redistest.Start(t, 3)
	a := agenttest.Start(t, agenttest.Config(t, servers, time.Second))
	c, other := agenttest.Dial(t, a.SocketPath()), agenttest.Dial(t, a.SocketPath())
	excl := []string{"mode", "exclusive"}

	if r := c.Do("LOCK m/a wait=0"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	s := scrapeAgent(t, a)
	s.expect(t, 1, "lock_agent_grants_total", excl...)
	s.expect(t, 1, "lock_agent_holds", excl...)
	s.expect(t, 1, "lock_agent_wait_seconds", "mode", "exclusive", "outcome", "granted")
	for _, m := range []string{"m0", "m1", "m2"} {
		// The round may be decided before the last master answers.
		awaitMetric(t, a, 1, "lock_agent_master_op_duration_seconds", "master", m, "op", "acquire")
	}

	if r := other.Do("LOCK m/a wait=0"); r.Kind != "BUSY" {
		t.Fatal(r.Line)
	}
	_, waiting := other.Send("LOCK m/a wait=10s")
	c.AwaitWaiters(1)
	s = scrapeAgent(t, a)
	s.expect(t, 1, "lock_agent_busy_total", excl...)
	s.expect(t, 1, "lock_agent_wait_seconds", "mode", "exclusive", "outcome", "busy")
	s.expect(t, 1, "lock_agent_waiters", excl...)

	if r := c.Do("LOCK m/a"); r.Kind != "OK" || r.Fields["count"] != "2" {
		t.Fatal(r.Line)
	}
	scrapeAgent(t, a).expect(t, 1, "lock_agent_reentries_total", excl...)

	// The watchdog renews the hold every lease/3: its round and each
	// master's part in it are timed.
	// (One by one: a scrape may fall between the round's observations.)
	awaitMetric(t, a, 1, "lock_agent_renewal_batch_holds")
	awaitMetric(t, a, 1, "lock_agent_renewal_round_duration_seconds")
	awaitMetric(t, a, 1, "lock_agent_master_op_duration_seconds", "master", "m1", "op", "renew")

	c.Do("UNLOCK m/a")
	if r := c.Do("UNLOCK m/a"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	if r := other.Await(waiting); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	s = scrapeAgent(t, a)
	s.expect(t, 2, "lock_agent_grants_total", excl...)
	s.expect(t, 0, "lock_agent_waiters", excl...)
	s.expect(t, 1, "lock_agent_holds", excl...) // other's
	s.expect(t, 1, "lock_agent_hold_seconds", excl...)

	if r := c.Do("LOCK m/short ttl=60ms"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	if p := c.Push(5 * time.Second); !strings.Contains(p, "reason=expired") {
		t.Fatalf("push %q, want a LOST reason=expired", p)
	}
	s = scrapeAgent(t, a)
	s.expect(t, 1, "lock_agent_losses_total", "reason", "expired")
	s.expect(t, 0, "lock_agent_losses_total", "reason", "quorum")
	s.expect(t, 1, "lock_agent_holds", excl...)
	s.expect(t, 2, "lock_agent_hold_seconds", excl...)
	s.expect(t, 2, "lock_agent_sessions") // c and other
	s.expect(t, 2, "lock_agent_quorum")
}

// TestMetricsShowPausedMasters: the master state gauges follow the probe; a
// hold whose masters stop answering is lost by quorum, and what cannot
// reach a majority is counted as NO_QUORUM.
func TestMetricsShowPausedMasters(t *testing.T) {
	servers := redistest.Start(t, 3)
	a := agenttest.Start(t, agenttest.Config(t, servers, time.Second))
	c := agenttest.Dial(t, a.SocketPath())
	s := scrapeAgent(t, a)
	for _, m := range []string{"m0", "m1", "m2"} {
		s.expect(t, 1, "lock_agent_master_state", "master", m, "state", "up")
		s.expect(t, 0, "lock_agent_master_state", "master", m, "state", "down")
	}

	servers[1].Pause()
	defer servers[1].Resume()
	c.AwaitMasters("down", 1)
	s = scrapeAgent(t, a)
	s.expect(t, 0, "lock_agent_master_state", "master", "m1", "state", "up")
	s.expect(t, 1, "lock_agent_master_state", "master", "m1", "state", "down")
	s.expect(t, 1, "lock_agent_master_state", "master", "m0", "state", "up")
	s.expect(t, 1, "lock_agent_master_state", "master", "m2", "state", "up")

	if r := c.Do("LOCK p/held"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	servers[2].Pause()
	defer servers[2].Resume()
	if p := c.Push(5 * time.Second); !strings.Contains(p, "reason=quorum") {
		t.Fatalf("push %q, want a LOST reason=quorum", p)
	}
	c.AwaitMasters("down", 2)
	if r := c.Do("LOCK p/other wait=0"); r.Code != "NO_QUORUM" {
		t.Fatal(r.Line)
	}
	if r := c.Do("WHO p/other"); r.Code != "NO_QUORUM" {
		t.Fatal(r.Line)
	}
	s = scrapeAgent(t, a)
	s.expect(t, 1, "lock_agent_losses_total", "reason", "quorum")
	s.expect(t, 1, "lock_agent_no_quorum_total", "verb", "lock")
	s.expect(t, 1, "lock_agent_no_quorum_total", "verb", "who")
	s.expect(t, 0, "lock_agent_holds", "mode", "exclusive")
	s.expect(t, 1, "lock_agent_master_state", "master", "m2", "state", "down")
}

// TestMetricsNeverCarryALockName: whatever clients do, no lock name, owner
// or other request data reaches the metrics, and every label value of the
// agent's own series comes from a small fixed set.
func TestMetricsNeverCarryALockName(t *testing.T) {
	servers := redistest.Start(t, 3)
	a := agenttest.Start(t, agenttest.Config(t, servers, time.Second))
	c, other := agenttest.Dial(t, a.SocketPath()), agenttest.Dial(t, a.SocketPath())
	name, owner := "secret-"+randomHex(t), "owner-"+randomHex(t)

	c.Do("HELLO client=" + owner)
	if r := c.Do("LOCK " + name + " owner=" + owner); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	other.Do("LOCK " + name + " wait=0")
	other.Do("LOCK " + name + " wait=30ms")
	c.Do("WHO " + name)
	c.Do("EXTEND " + name + " owner=" + owner + " ttl=2s")
	c.Do("HOLDS")
	c.Do("LOCK " + name + "/ttl ttl=60ms owner=" + owner)
	c.Push(5 * time.Second)
	awaitMetric(t, a, 1, "lock_agent_renewal_batch_holds")
	c.Do("UNLOCK " + name + " owner=" + owner)

	s := scrapeAgent(t, a)
	for _, secret := range []string{name, owner} {
		if strings.Contains(s.text, secret) {
			t.Errorf("the metrics carry %q:\n%s", secret, s.text)
		}
	}
	build := buildinfo.Get()
	allowed := map[string]bool{"m0": true, "m1": true, "m2": true, build.Version: true, build.Commit: true, build.GoVersion: true}
	for _, set := range [][]string{{"exclusive", "shared"}, {"granted", "busy", "failed"}, {"lock", "extend", "who"},
		{"quorum", "expired", "revoked"}, {"acquire", "renew", "extend", "release", "who", "downgrade", "enqueue", "dequeue", "set"}, {"up", "down", "quarantined", "unsafe", "settings"}, {"new", "lost", "unknown", "changed"}} {
		for _, v := range set {
			allowed[v] = true
		}
	}
	for fname, f := range s.families {
		if !strings.HasPrefix(fname, "lock_agent_") {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if !allowed[l.GetValue()] {
					t.Errorf("%s has label %s=%q, outside the fixed sets", fname, l.GetName(), l.GetValue())
				}
			}
		}
	}
}

func randomHex(t *testing.T) string {
	b := make([]byte, 6)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// TestMetricsCountFenceSettlesAndQuarantines: a grant whose masters
// disagree on the fence waits for it to be written back, and a master that
// lost its data is counted as it enters quarantine.
func TestMetricsCountFenceSettlesAndQuarantines(t *testing.T) {
	servers := redistest.Start(t, 3)
	// A quarantine lasts a lease: 3s, so that the probe after the one that
	// met the loss still finds it (with 1s, a probe late on a loaded host
	// came after its end, and the gauge never showed it).
	a := agenttest.Start(t, agenttest.Config(t, servers, 3*time.Second))
	c := agenttest.Dial(t, a.SocketPath())
	s := scrapeAgent(t, a)
	s.expect(t, 0, "lock_agent_fence_settles_total")
	s.expect(t, 0, "lock_agent_quarantines_total", "master", "m0")

	// With m2 out, m0 and m1 are the granting majority; m0's counter is
	// far behind m1's, so the grant waits until m0 is brought up to it.
	servers[2].Pause()
	c.AwaitMasters("down", 1)
	if _, err := servers[0].Do("SET", "lock-agent:{f}:fence", "1"); err != nil {
		t.Fatal(err)
	}
	if r := c.Do("LOCK f"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	s = scrapeAgent(t, a)
	s.expect(t, 1, "lock_agent_fence_settles_total")
	s.expect(t, 1, "lock_agent_fence_writebacks_total")
	servers[2].Resume()
	c.AwaitMasters("up", 3)

	if _, err := servers[0].Do("FLUSHALL"); err != nil {
		t.Fatal(err)
	}
	awaitMetric(t, a, 1, "lock_agent_quarantines_total", "master", "m0")
	// The state gauge follows at the next probe.
	s = awaitMetric(t, a, 1, "lock_agent_master_state", "master", "m0", "state", "quarantined")
	s.expect(t, 0, "lock_agent_quarantines_total", "master", "m1")
}
