package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestClusterBlock(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  string
		errs []string // every one must appear in the error text; nil for none
	}{
		{"seed nodes are a master", "redis \"a\" {\n  cluster = [\"n1:7000\", \"n2:7000\"]\n}", nil},
		{"TLS and credentials go with a cluster as with an address",
			"redis \"a\" {\n  cluster = [\"n1:7000\"]\n  username = \"u\"\n  password = \"p\"\n  tls {\n    server_name = \"redis.internal\"\n  }\n}", nil},
		{"allow_replicas and max_replica_lag go with a cluster, for its shards' replicas",
			"redis \"a\" {\n  cluster = [\"n1:7000\"]\n  max_replica_lag = \"2s\"\n}\nredis \"b\" {\n  cluster = [\"m1:7000\"]\n  allow_replicas = true\n}", nil},
		{"db 0 is the only database of a cluster, and may be said", "redis \"a\" {\n  cluster = [\"n1:7000\"]\n  db = 0\n}", nil},
		{"a prefix with braces is fine without a cluster", "redis \"a\" { address = \"h:1\" }\nlock { key_prefix = \"{locks}:\" }", nil},
		{"an empty list is an error that says what to give",
			"redis \"a\" {\n  cluster = []\n}", []string{"x.hcl:2", "redis \"a\".cluster", "want at least one seed node", "host:port"}},
		{"a seed must be host:port", "redis \"a\" {\n  cluster = [\"n1:7000\", \"n2\"]\n}", []string{"x.hcl:2", "want host:port, got \"n2\""}},
		{"an address and a cluster is an error at the cluster", "redis \"a\" {\n  address = \"h:1\"\n  cluster = [\"n1:7000\"]\n}",
			[]string{"x.hcl:3", "give address (one Redis server) or cluster", "not both"}},
		{"sentinels and a cluster is an error at the cluster", "redis \"a\" {\n  sentinels = [\"s1:26379\"]\n  master_set = \"m\"\n  cluster = [\"n1:7000\"]\n}",
			[]string{"x.hcl:4", "give sentinels and master_set", "fails over its own shards", "not both"}},
		{"a master set does not go with a cluster", "redis \"a\" {\n  cluster = [\"n1:7000\"]\n  master_set = \"m\"\n}",
			[]string{"x.hcl:3", "master_set goes with sentinels, not cluster", "remove it"}},
		{"Sentinel credentials do not go with a cluster", "redis \"a\" {\n  cluster = [\"n1:7000\"]\n  sentinel_username = \"u\"\n  sentinel_password = \"p\"\n}",
			[]string{"x.hcl:3", "sentinel_username goes with sentinels", "x.hcl:4", "sentinel_password goes with sentinels"}},
		{"a database other than 0 is an error", "redis \"a\" {\n  cluster = [\"n1:7000\"]\n  db = 2\n}",
			[]string{"x.hcl:3", "redis \"a\".db", "database 0 only", "remove db", "key_prefix"}},
		{"a brace in the key prefix is an error once a master is a cluster",
			"redis \"a\" { address = \"h:1\" }\nredis \"b\" { cluster = [\"n1:7000\"] }\nlock {\n  key_prefix = \"locks{x}:\"\n}",
			[]string{"x.hcl:4", "lock.key_prefix", "master \"b\" is a Redis Cluster", "one slot", "without braces"}},
		{"a closing brace alone is refused too", "redis \"b\" { cluster = [\"n1:7000\"] }\nlock {\n  key_prefix = \"locks}\"\n}",
			[]string{"x.hcl:3", "lock.key_prefix"}},
		{"no master at all names the cluster form", "", []string{"No redis masters", "cluster = [...]"}},
		{"a block with nothing to reach names the cluster form", "redis \"a\" {}", []string{"address", "sentinels", "cluster = [\"host:port\", ...]"}},
		{"a typo in cluster suggests the key", "redis \"a\" {\n  clustr = [\"n1:7000\"]\n}", []string{"x.hcl:2", "Did you mean \"cluster\""}},
		{"every error of a cluster block is reported together",
			"redis \"a\" {\n  cluster = [\"n1\"]\n  address = \"h:1\"\n  db = 1\n}", []string{"want host:port, got \"n1\"", "not both", "database 0 only"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.src), "x.hcl")
			switch {
			case tc.errs == nil && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.errs != nil && err == nil:
				t.Fatalf("no error, want %q", tc.errs)
			}
			for _, want := range tc.errs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}

func TestClusterMasterConfig(t *testing.T) {
	c, err := Parse([]byte(`
redis "a" {
  cluster = ["10.0.0.1:7000", "10.0.0.2:7000", "10.0.0.3:7000"]
  username = "lock-agent"
  password = "pw"
  max_replica_lag = "2s"
  tls { server_name = "redis-a.internal" }
}
redis "b" { address = "127.0.0.1:2" }
`), "t.hcl")
	if err != nil {
		t.Fatal(err)
	}
	a, b := c.Masters[0], c.Masters[1]
	if !slices.Equal(a.Cluster, []string{"10.0.0.1:7000", "10.0.0.2:7000", "10.0.0.3:7000"}) || a.Address != "" || len(a.Sentinels) != 0 ||
		a.Username != "lock-agent" || a.Password != "pw" || a.ReplicaLag != 2*time.Second || a.DB != 0 || a.TLS == nil || a.TLS.ServerName != "redis-a.internal" {
		t.Fatalf("master a: %+v", a)
	}
	if b.Cluster != nil || b.Address != "127.0.0.1:2" {
		t.Fatalf("master b: %+v", b)
	}
}

// TestTheCommentedClusterExamplesAreValid: the cluster blocks that the
// sample configs show commented out validate once uncommented.
func TestTheCommentedClusterExamplesAreValid(t *testing.T) {
	for _, path := range []string{"../../agent.hcl", "../../examples/agent.hcl"} {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		block := commentedBlock(string(src), "cluster")
		if block == "" {
			t.Fatalf("%s: no commented redis block with cluster", path)
		}
		pw := filepath.Join(t.TempDir(), "pw")
		os.WriteFile(pw, []byte("s3cret\n"), 0o600)
		block = strings.ReplaceAll(block, "/etc/lock-agent/redis.pass", pw)
		c, err := Parse([]byte(block), path)
		if err != nil || len(c.Masters) != 1 || len(c.Masters[0].Cluster) == 0 {
			t.Errorf("%s: the cluster example\n%s\ndecoded to %+v, %v", path, block, c.Masters, err)
		}
	}
}

// commentedBlock returns, uncommented, the first commented-out redis block
// of src that sets attr, or "".
func commentedBlock(src, attr string) string {
	var block []string
	for _, line := range strings.Split(src, "\n") {
		switch {
		case strings.HasPrefix(line, "# redis "):
			block = []string{line}
		case block != nil && strings.HasPrefix(line, "#"):
			block = append(block, line)
		default:
			block = nil
		}
		if block != nil && line == "# }" {
			text := strings.TrimPrefix(strings.Join(block, "\n"), "# ")
			text = strings.ReplaceAll(text, "\n# ", "\n")
			if strings.Contains(text, attr+" ") {
				return text
			}
			block = nil
		}
	}
	return ""
}
