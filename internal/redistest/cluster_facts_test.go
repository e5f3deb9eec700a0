package redistest

import (
	"bufio"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The tests in this file pin what Redis 7.0 does in a cluster that the
// design of a cluster master depends on (issue 20 item 1): if a Redis
// upgrade changes it, they fail.

// TestClusterScriptCacheAndRunIDs: SCRIPT LOAD reaches only the node it
// is sent to (7.0 replicates a script's effects, not the script), so a
// promoted replica answers NOSCRIPT; promotion keeps a node's run_id and a
// restart gives it a new one.
func TestClusterScriptCacheAndRunIDs(t *testing.T) {
	c := StartCluster(t, ClusterOptions{Shards: 3, Replicas: 1})
	sh := c.Shards()[0]
	primary, replica := sh.Primary, sh.Replicas[0]
	sha := c.mustDo(primary, "SCRIPT", "LOAD", existsScript)
	c.mustDo(primary, "EVALSHA", sha, "1", c.keyIn(sh))
	c.awaitAcks(sh) // the replica has all the primary replicated
	if scriptExists(t, replica, sha) {
		t.Fatal("the replica has the script its primary loaded")
	}
	runIDs := map[*Server]string{primary: runID(t, primary), replica: runID(t, replica)}
	c.Failover(sh)
	if got := runID(t, replica); got != runIDs[replica] {
		t.Fatalf("the promoted replica's run_id went from %s to %s", runIDs[replica], got)
	}
	if _, err := replica.Do("EVALSHA", sha, "1", c.keyIn(sh)); err == nil || !strings.Contains(err.Error(), "NOSCRIPT") {
		t.Fatalf("EVALSHA on the promoted replica: %v, want NOSCRIPT", err)
	}
	if !scriptExists(t, primary, sha) {
		t.Fatal("the old primary lost its script when it became a replica")
	}
	c.RestartEmpty(sh)
	if got := runID(t, replica); got == runIDs[replica] {
		t.Fatalf("the restarted primary kept its run_id %s", got)
	}
}

func scriptExists(t *testing.T, s *Server, sha string) bool {
	t.Helper()
	exists, err := s.Array("SCRIPT", "EXISTS", sha)
	if err != nil || len(exists) != 1 {
		t.Fatalf("%s: SCRIPT EXISTS: %q %v", s.Addr, exists, err)
	}
	return exists[0] == "1"
}

func runID(t *testing.T, s *Server) string {
	t.Helper()
	info, err := s.Info("server")
	if err != nil {
		t.Fatal(err)
	}
	return InfoField(info, "run_id")
}

// TestClusterPublishFromScript: a PUBLISH in a script goes to the
// subscribers on every node, replicas too; a script may SPUBLISH on a
// channel of its keys' slot, which reaches the SSUBSCRIBErs on the slot's
// primary and its replicas, but not on a channel of another node's slot;
// and SSUBSCRIBE is redirected to the slot's owner.
func TestClusterPublishFromScript(t *testing.T) {
	c := StartCluster(t, ClusterOptions{Shards: 3, Replicas: 1})
	sh := c.Owner(SlotOf("P{x}"))
	other := c.Shards()[(slices.Index(c.Shards(), sh)+1)%len(c.Shards())]
	const channel = "P{x}:released"
	subscribers := []*subscription{subscribe(t, other.Primary, "SUBSCRIBE", channel), subscribe(t, other.Replicas[0], "SUBSCRIBE", channel)}
	sharded := []*subscription{subscribe(t, sh.Primary, "SSUBSCRIBE", channel), subscribe(t, sh.Replicas[0], "SSUBSCRIBE", channel)}
	c.mustDo(sh.Primary, "EVAL", "return redis.call('publish', KEYS[1]..':released', 'plain')", "1", "P{x}")
	for _, s := range subscribers {
		if got := s.next(t); strings.Join(got, " ") != "message "+channel+" plain" {
			t.Fatalf("a subscriber on %s got %q", s.node, got)
		}
	}
	c.mustDo(sh.Primary, "EVAL", "redis.call('set', KEYS[1], 1) return redis.call('spublish', KEYS[1]..':released', 'sharded')", "1", "P{x}")
	for _, s := range sharded {
		if got := s.next(t); strings.Join(got, " ") != "smessage "+channel+" sharded" {
			t.Fatalf("a shard subscriber on %s got %q", s.node, got)
		}
	}
	elsewhere := c.keyIn(other) + ":released"
	_, err := sh.Primary.Do("EVAL", "return redis.call('spublish', ARGV[1], 'x')", "1", "P{x}", elsewhere)
	if err == nil || !strings.Contains(err.Error(), "non local key") {
		t.Fatalf("a script's SPUBLISH on a channel of another node's slot: %v, want a non local key error", err)
	}
	if _, err := other.Primary.Array("SSUBSCRIBE", channel); err == nil || !strings.Contains(err.Error(), "MOVED") {
		t.Fatalf("SSUBSCRIBE on a node that does not own the slot: %v, want MOVED", err)
	}
}

// subscription is a connection subscribed to one channel.
type subscription struct {
	node string
	conn net.Conn
	r    *bufio.Reader
}

func subscribe(t *testing.T, s *Server, verb, channel string) *subscription {
	t.Helper()
	conn, err := s.dial()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	sub := &subscription{node: s.Addr, conn: conn, r: bufio.NewReader(conn)}
	fmt.Fprintf(conn, "*2\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", len(verb), verb, len(channel), channel)
	if got := sub.next(t); len(got) != 3 || got[0] != strings.ToLower(verb) {
		t.Fatalf("%s %s on %s: %q", verb, channel, s.Addr, got)
	}
	return sub
}

// next is the next message, which must come within 5s.
func (s *subscription) next(t *testing.T) []string {
	t.Helper()
	s.conn.SetDeadline(time.Now().Add(5 * time.Second))
	msg, err := readFlat(s.r)
	if err != nil {
		t.Fatalf("a subscriber on %s: %v", s.node, err)
	}
	return msg
}

// TestClusterScriptsDuringMigration: the replies to a script whose keys
// are in a slot half-migrated, by where its keys are. A script runs on the
// source only if every key it declares is there, and on the target (after
// ASKING) only if every key is there or it has just one; otherwise the
// source sends it on with ASK (no key there) or both refuse with TRYAGAIN.
func TestClusterScriptsDuringMigration(t *testing.T) {
	c := StartCluster(t, ClusterOptions{Shards: 3, Replicas: 0})
	slot := SlotOf("{m}")
	from := c.Owner(slot)
	to := c.Shards()[(slices.Index(c.Shards(), from)+1)%len(c.Shards())]
	for _, key := range []string{"{m}:a", "{m}:b", "{m}:c", "{m}:d"} {
		c.mustDo(from.Primary, "SET", key, "v")
	}
	c.BeginMigration(slot, to)
	c.mustDo(from.Primary, "MIGRATE", "127.0.0.1", strconv.Itoa(to.Primary.port), "", "0", "5000", "KEYS", "{m}:b", "{m}:d")
	ask, moved := fmt.Sprintf("ASK %d %s", slot, to.Primary.Addr), fmt.Sprintf("MOVED %d %s", slot, from.Primary.Addr)
	const create = "for _, k in ipairs(KEYS) do redis.call('set', k, 1) end return #KEYS"
	for _, tc := range []struct {
		name   string
		target bool // sent to the target, after ASKING; else to the source
		script string
		keys   []string
		want   string // the reply, or the start of the error
	}{
		{"on the source, every key there: it runs", false, existsScript, []string{"{m}:a", "{m}:c"}, "2"},
		{"on the source, one of its keys moved: TRYAGAIN", false, existsScript, []string{"{m}:a", "{m}:b"}, "TRYAGAIN"},
		{"on the source, its one key moved: ASK", false, existsScript, []string{"{m}:b"}, ask},
		{"on the source, its one key nowhere: ASK", false, existsScript, []string{"{m}:z"}, ask},
		{"on the source, none of its keys there: ASK", false, existsScript, []string{"{m}:b", "{m}:z"}, ask},
		{"on the source, creating its one key: ASK", false, create, []string{"{m}:new"}, ask},
		{"on the source, creating one key beside one there: TRYAGAIN", false, create, []string{"{m}:a", "{m}:new"}, "TRYAGAIN"},
		{"on the source, an undeclared key that moved: an error", false, "return redis.call('get', '{m}:b')", []string{"{m}:a"}, "ERR Script attempted to access a non local key"},
		{"on the target, every key there: it runs", true, existsScript, []string{"{m}:b", "{m}:d"}, "2"},
		{"on the target, its one key there: it runs", true, existsScript, []string{"{m}:b"}, "1"},
		{"on the target, its one key nowhere: it runs", true, existsScript, []string{"{m}:y"}, "0"},
		{"on the target, creating its one key: it runs", true, create, []string{"{m}:new"}, "1"},
		{"on the target, one key there and one not: TRYAGAIN", true, existsScript, []string{"{m}:b", "{m}:z"}, "TRYAGAIN"},
		{"on the target, none of its keys there: TRYAGAIN", true, existsScript, []string{"{m}:y", "{m}:z"}, "TRYAGAIN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := from.Primary
			if tc.target {
				node = to.Primary
			}
			if got := evalOn(t, node, tc.target, tc.script, tc.keys); !strings.HasPrefix(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
	if got := evalOn(t, to.Primary, false, existsScript, []string{"{m}:b"}); got != moved {
		t.Fatalf("on the target without ASKING: %q, want %q", got, moved)
	}
}

// evalOn runs script with keys on s (after ASKING if asking) and returns
// its reply's first line, or the error.
func evalOn(t *testing.T, s *Server, asking bool, script string, keys []string) string {
	t.Helper()
	conn, err := s.dial()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if asking {
		if _, err := do(conn, "ASKING"); err != nil {
			t.Fatal(err)
		}
	}
	reply, err := do(conn, append([]string{"EVAL", script, strconv.Itoa(len(keys))}, keys...)...)
	if err != nil {
		return strings.TrimPrefix(err.Error(), "redis: ")
	}
	return reply
}
