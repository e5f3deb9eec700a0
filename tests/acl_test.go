package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// aclRules is the Redis ACL that docs/operations.md tells operators to give
// the agent's user: keep the two in step.
const aclRules = "~lock-agent:* &lock-agent:* +@scripting +smembers +pttl +srem +set +sadd +pexpire +del +get +exists " +
	"+hset +hget +hmget +time +publish +subscribe +unsubscribe +ping +hello +select +info"

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
}
