package tests

import (
	"os/exec"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// breaker19Lock: a short lease and a long linger, so that a cache would
// outlive what the test looks at if its agent left it behind.
const breaker19Lock = `  lease = "1s"
  cache_linger = "1m"
  key_prefix = "b19:"
`

// TestBreaker19AStoppedCachingAgentReleasesItsCache: SIGTERM of an agent
// that caches a name (a 1m linger) releases the record at once: the other
// agent's wait=0 LOCK is granted right after the exit.
func TestBreaker19AStoppedCachingAgentReleasesItsCache(t *testing.T) {
	t.Parallel() // see TestMain
	servers := redistest.Start(t, 3)
	agents := startProcAgents(t, binary(t), servers, breaker19Lock, "host-a", "host-b")
	ca, cb := agenttest.Dial(t, agents[0].sock), agenttest.Dial(t, agents[1].sock)
	first := cacheIt(t, ca, "LOCK stop19")
	awaitCachedWho(t, cb, "stop19", "host-a", 0)
	if keys := servers[0].Keys("b19:{stop19}:h:*"); keys != 1 {
		t.Fatalf("%d records of the cached name on a master, want 1: the check below would prove nothing", keys)
	}
	agents[0].stop(t)
	if keys := servers[0].Keys("b19:{stop19}:h:*") + servers[1].Keys("b19:{stop19}:h:*"); keys != 0 {
		t.Fatalf("%d cached records left on the masters after the agent stopped", keys)
	}
	if r := cb.Do("LOCK stop19 wait=0"); r.Kind != "OK" || r.Int("fence") <= first.Int("fence") {
		t.Fatalf("LOCK after the caching agent stopped: %s", r.Line)
	}
}

// TestBreaker19AKilledCachingAgentLeaksNoCache: kill -9 of an agent that
// caches a name: the other agent is granted it once the lease ran out,
// and the killed agent, restarted, lends nothing of its old cache.
func TestBreaker19AKilledCachingAgentLeaksNoCache(t *testing.T) {
	servers := redistest.Start(t, 3)
	bin := binary(t)
	agents := startProcAgents(t, bin, servers, breaker19Lock, "host-b")
	cfgPath, sock := procAgentConfig(t, "host-a", servers, breaker19Lock)
	killed := exec.Command(bin, "run", "-config", cfgPath)
	if err := killed.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killed.Process.Kill(); killed.Wait() })
	waitForListener(t, sock)
	ca, cb := agenttest.Dial(t, sock), agenttest.Dial(t, agents[0].sock)
	ca.AwaitMasters("up", 3)
	first := cacheIt(t, ca, "LOCK kill19")
	awaitCachedWho(t, cb, "kill19", "host-a", 0)
	killed.Process.Kill()
	killed.Wait()
	start := time.Now()
	r := cb.Do("LOCK kill19 wait=5s")
	if r.Kind != "OK" || r.Int("fence") <= first.Int("fence") {
		t.Fatalf("LOCK after the caching agent was killed: %s", r.Line)
	}
	t.Logf("granted %v after the kill", time.Since(start))
	startProcAgent(t, bin, "host-a", cfgPath, sock)
	ca = agenttest.Dial(t, sock)
	if r := ca.Do("LOCK kill19 wait=0"); r.Kind != "BUSY" {
		t.Fatalf("the restarted agent, while the other holds the name: %s", r.Line)
	}
	cb.Do("UNLOCK kill19")
	if r := ca.Do("LOCK kill19 wait=5s"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
}
