package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// aclRules is the Redis ACL that docs/operations.md tells operators to give
// the agent's user: keep the two in step.
const aclRules = "~lock-agent:* &lock-agent:* +@scripting +smembers +pttl +srem +set +sadd +pexpire +del +get +exists " +
	"+hset +hget +hmget +hdel +rename +sismember +zadd +zrem +zscore +zrange +zrangebyscore +zcard +zcount +time +publish +subscribe +unsubscribe +ping +hello +select +info"

// TestAgentRunsAsARestrictedACLUser runs the agent as a Redis user with only
// the documented permissions, its password read from a file: locking,
// re-entry, WHO, renewal, EXTEND and the release message all work.
func TestAgentRunsAsARestrictedACLUser(t *testing.T) {
	servers := redistest.Start(t, 3)
	for _, s := range servers {
		args := append([]string{"ACL", "SETUSER", "lock-agent", "reset", "on", ">s3cret"}, strings.Fields(aclRules)...)
		if _, err := s.Do(args...); err != nil {
			t.Fatal(err)
		}
		s.Do("ACL", "SETUSER", "lock-agent", "+client|setinfo")             // Redis 7.2+ only: older servers refuse the rule
		if _, err := s.Do("ACL", "SETUSER", "default", "off"); err != nil { // nothing else may get in
			t.Fatal(err)
		}
	}
	pass := filepath.Join(t.TempDir(), "redis.pass")
	os.WriteFile(pass, []byte("s3cret\n"), 0o600)
	cfg := agenttest.Config(t, servers, time.Second)
	for i := range cfg.Masters {
		cfg.Masters[i].Username, cfg.Masters[i].Password = "lock-agent", "s3cret"
	}
	agenttest.Bootstrap(t, cfg)
	a := agenttest.Start(t, cfg)
	c := agenttest.Dial(t, a.Config.Socket.Path)
	waiter := agenttest.Dial(t, a.Config.Socket.Path)
	if r := c.Do("LOCK acl/name"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	if r := c.Do("LOCK acl/name"); r.Int("count") != 2 {
		t.Fatal(r.Line)
	}
	if r := c.Do("WHO acl/name"); r.Int("n") != 1 {
		t.Fatal(r.Line)
	}
	if r := c.Do("LOCK acl/ttl ttl=200ms"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	if r := c.Do("EXTEND acl/ttl ttl=5s"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	_, ch := waiter.Send("LOCK acl/name wait=5s")
	waiter.AwaitWaiters(1)
	time.Sleep(1500 * time.Millisecond) // past the 1s lease: renewals ran as the restricted user
	if p := c.Push(0); p != "" {
		t.Fatalf("lost a hold: %s", p)
	}
	c.Do("UNLOCK acl/name")
	start := time.Now()
	c.Do("UNLOCK acl/name")
	if r := waiter.Await(ch); r.Kind != "OK" || time.Since(start) > 500*time.Millisecond {
		t.Fatalf("waiter: %s after %v (release message not received?)", r.Line, time.Since(start))
	}
	coordinateAsARestrictedUser(t, a)
}

// coordinateAsARestrictedUser runs what issue 18 added over the masters as
// the restricted user: a fair queue (sorted sets), a value and SET, an
// observer, a WHO with waiters (hashes and sorted sets), and a hold with a
// delay= that ends uncleanly (its record renamed into a tail); a command
// the ACL lacks fails a script, and with it a hold or an answer.
func coordinateAsARestrictedUser(t *testing.T, a *agenttest.Agent) {
	c, other, watcher := agenttest.Dial(t, a.Config.Socket.Path), agenttest.Dial(t, a.Config.Socket.Path), agenttest.Dial(t, a.Config.Socket.Path)
	if r := watcher.Do("OBSERVE acl/lead"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	if r := c.Do("LOCK acl/lead fair=true value=one"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	_, queued := other.Send("LOCK acl/lead fair=true wait=5s")
	awaitQueued(t, watcher, "acl/lead", 1)
	if r := c.Do("SET acl/lead value=two"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	if r := watcher.Do("WHO acl/lead"); r.Kind != "OK" || !strings.Contains(r.Line, "waiting=1") {
		t.Fatalf("WHO: %s %v", r.Line, r.Data)
	}
	c.Do("UNLOCK acl/lead")
	if r := other.Await(queued); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	// A tail long enough to be seen on a loaded host: 200ms was over
	// before a WHO came (CI saw "no tail after an unclean end").
	if r := c.Do("LOCK acl/delay delay=1s"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	c.Close() // an unclean end: the record becomes a tail
	lockagenttest.Eventually(t, 2*time.Second, func() bool {
		r := other.Do("WHO acl/delay")
		return r.Kind == "OK" && len(r.Data) == 1 && r.Data[0]["delayed_until"] != ""
	}, "no tail after an unclean end")
	if r := other.Do("LOCK acl/delay wait=10s"); r.Kind != "OK" { // granted when the tail ends (3s was short under load)
		t.Fatal(r.Line)
	}
	for p := watcher.Push(0); p != ""; p = watcher.Push(0) {
		if !strings.HasPrefix(p, "* LEADER acl/lead ") {
			t.Fatalf("observer: %s", p)
		}
	}
}
