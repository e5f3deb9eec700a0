package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	lockagent "github.com/lock-agent/lock-agent/clients/go"
	"github.com/lock-agent/lock-agent/clients/go/lockagenttest"
	"github.com/lock-agent/lock-agent/quorum"
)

// clusterStatus is a STATUS reply, as the agent formats it (see agent's
// TestStatusLineShowsEachShardOfAClusterMaster), with a standalone master
// and a master that is a Redis Cluster of three shards: one up, one whose
// slots sit out a quarantine, one down.
var clusterStatus = []string{
	"DATA master=a address=h:1 state=up settings=lease=15s",
	"DATA master=c address=cluster@10.0.0.1:7000,10.0.0.2:7000 state=up settings=lease=15s" +
		" shard=address=10.0.0.1:7000;slots=0-5460;state=up" +
		" shard=address=10.0.0.3:7000;slots=10923-16383;state=quarantined;quarantined_slots=5461;quarantine_left=1500;reason=new_or_lost_its_data" +
		" shard=address=10.0.0.2:7000;slots=5461-10922,16000;state=down;reason=dial_tcp:_i/o_timeout",
	"OK agent=0.1.0 id=web-7 sessions=0 holds=0 waiters=0 quorum=2 tolerates=0 settings=lease=15s",
}

// TestStatusShowsEachShardOfAClusterMaster: status prints a row per shard
// under its master, with its slots, primary, state and why it does not
// vote, and -json gives them as the master's shards.
func TestStatusShowsEachShardOfAClusterMaster(t *testing.T) {
	fake := lockagenttest.StartFake(t, func(string, []string) []string { return clusterStatus })
	var stdout, stderr bytes.Buffer
	if code := statusCmd([]string{"-socket", fake.Path}, &stdout, &stderr); code != exitOK {
		t.Fatalf("status: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	lines := strings.Split(stdout.String(), "\n")
	for _, want := range [][]string{
		{"c ", "cluster@10.0.0.1:7000,10.0.0.2:7000", "up"},
		{"  slots 0-5460 ", "10.0.0.1:7000", "up"},
		{"  slots 10923-16383 ", "10.0.0.3:7000", "quarantined", "5461 of its slots are new or lost their data; they vote again in 1.5s"},
		{"  slots 5461-10922,16000 ", "10.0.0.2:7000", "down", "dial_tcp:_i/o_timeout"},
	} {
		if !hasRow(lines, want) {
			t.Errorf("status printed:\n%s\nwant a row with %q", stdout.String(), want)
		}
	}
	if !strings.Contains(stdout.String(), "2/2 masters up") {
		t.Errorf("status printed:\n%s\nwant the shards not counted as masters", stdout.String())
	}

	stdout.Reset()
	statusCmd([]string{"-socket", fake.Path, "-json"}, &stdout, &stderr)
	var s struct {
		Masters []master `json:"masters"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Masters) != 2 || s.Masters[0].Shards != nil || len(s.Masters[1].Shards) != 3 {
		t.Fatalf("-json: %+v", s.Masters)
	}
	want := shard{Address: "10.0.0.3:7000", Slots: "10923-16383", State: "quarantined", QuarantinedSlots: 5461, QuarantineLeftMS: 1500, Reason: "new_or_lost_its_data"}
	if got := s.Masters[1].Shards[1]; got != want || s.Masters[1].Name != "c" || s.Masters[1].State != "up" {
		t.Errorf("-json master c: %+v, shard %+v; want shard %+v", s.Masters[1].Master, got, want)
	}
	if strings.Count(stdout.String(), `"shards"`) != 1 {
		t.Errorf("-json: a standalone master shows shards:\n%s", stdout.String())
	}
}

// hasRow says whether some line has every one of words.
func hasRow(lines, words []string) bool {
	for _, l := range lines {
		found := true
		for _, w := range words {
			found = found && strings.Contains(l, w)
		}
		if found {
			return true
		}
	}
	return false
}

// TestOldParsersSkipTheShards: the Go client, which reads every STATUS
// DATA line as a master and its fields into a map, reads a cluster master
// as one master with its own fields.
func TestOldParsersSkipTheShards(t *testing.T) {
	fake := lockagenttest.StartFake(t, func(string, []string) []string { return clusterStatus })
	c, err := lockagent.Dial(context.Background(), fake.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []lockagent.Master{{Name: "a", Address: "h:1", State: "up", Settings: "lease=15s"}, {Name: "c", Address: "cluster@10.0.0.1:7000,10.0.0.2:7000", State: "up", Settings: "lease=15s"}}
	if len(s.Masters) != 2 || s.Masters[0] != want[0] || s.Masters[1] != want[1] {
		t.Fatalf("the Go client read %+v, want %+v", s.Masters, want)
	}
}

// TestValidateExplainsAWrongClusterBlock: validate, as run loads a file,
// accepts a cluster block and explains a wrong one at its lines.
func TestValidateExplainsAWrongClusterBlock(t *testing.T) {
	for _, tc := range []struct {
		name, hcl string
		code      int
		want      []string
	}{
		{"a cluster block is a master", "redis \"a\" {\n  cluster = [\"10.0.0.1:7000\", \"10.0.0.2:7000\"]\n}\n", exitOK,
			[]string{"valid (one master, quorum 1"}},
		{"a wrong one is explained at its lines", "redis \"a\" {\n  cluster = [\"10.0.0.1\"]\n  db = 3\n}\nlock {\n  key_prefix = \"{locks}:\"\n}\n", exitConfig,
			[]string{"agent.hcl:2: Invalid redis \"a\".cluster: want host:port, got \"10.0.0.1\"", "agent.hcl:3: Invalid redis \"a\".db: a Redis Cluster has database 0 only",
				"agent.hcl:6: Invalid lock.key_prefix: master \"a\" is a Redis Cluster"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "agent.hcl")
			if err := os.WriteFile(path, []byte(tc.hcl), 0o600); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			if code := validateCmd([]string{"-config", path}, &stdout, &stderr); code != tc.code {
				t.Fatalf("validate: exit %d, want %d\n%s%s", code, tc.code, stdout.String(), stderr.String())
			}
			for _, want := range tc.want {
				if !strings.Contains(stdout.String()+stderr.String(), want) {
					t.Errorf("validate printed:\n%s%s\nwant %q in it", stdout.String(), stderr.String(), want)
				}
			}
		})
	}
}

func TestAShardSaysWhyItDoesNotVote(t *testing.T) {
	for _, tc := range []struct {
		name string
		sh   shard
		want string
	}{
		{"a shard that votes says nothing", shard{State: "up"}, ""},
		{"a down shard gives its reason", shard{State: "down", Reason: "timed_out"}, "timed_out"},
		{"a quarantine says how many slots and how long", shard{State: "quarantined", QuarantinedSlots: 1, QuarantineLeftMS: 2500, Reason: "new_or_lost_its_data"},
			"one of its slots is new or lost their data; they vote again in 2.5s: wait; never lock-agent bootstrap a master that may have served locks"},
		{"a down shard with slots in quarantine says both", shard{State: "down", QuarantinedSlots: 3, QuarantineLeftMS: 1000, Reason: "timed_out"},
			"timed_out; 3 of its slots are new or lost their data; they vote again in 1s: wait; never lock-agent bootstrap a master that may have served locks"},
		{"no marker yet is said in words", shard{State: "quarantined", Reason: "no_marker_yet"}, quorum.UnplantedReason},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.sh.why(); got != tc.want {
				t.Errorf("why = %q, want %q", got, tc.want)
			}
		})
	}
}
