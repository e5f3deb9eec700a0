package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSentinelBlock(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  string
		errs []string // every one must appear in the error text; nil for none
	}{
		{"sentinels and a master set are a master", "redis \"a\" {\n  sentinels = [\"s1:26379\", \"s2:26379\"]\n  master_set = \"m\"\n}", nil},
		{"an address and sentinels is an error at the sentinels", "redis \"a\" {\n  address = \"h:1\"\n  sentinels = [\"s1:26379\"]\n  master_set = \"m\"\n}",
			[]string{"x.hcl:3", "not both"}},
		{"sentinels need a master set", "redis \"a\" {\n  sentinels = [\"s1:26379\"]\n}", []string{"master_set", "sentinel monitor NAME"}},
		{"a sentinel must be host:port", "redis \"a\" {\n  sentinels = [\"s1\"]\n  master_set = \"m\"\n}", []string{"x.hcl:2", "want host:port, got \"s1\""}},
		{"allow_replicas does not go with sentinels", "redis \"a\" {\n  sentinels = [\"s1:1\"]\n  master_set = \"m\"\n  allow_replicas = true\n}",
			[]string{"x.hcl:4", "min-replicas-to-write"}},
		{"master_set does not go with an address", "redis \"a\" {\n  address = \"h:1\"\n  master_set = \"m\"\n}", []string{"x.hcl:3", "go with sentinels"}},
		{"neither an address nor sentinels is an error", "redis \"a\" {}", []string{"address", "sentinels"}},
		{"max_replica_lag is whole seconds", "redis \"a\" {\n  address = \"h:1\"\n  max_replica_lag = \"1500ms\"\n}", []string{"x.hcl:3", "whole seconds"}},
		{"max_replica_lag is at least a second", "redis \"a\" {\n  address = \"h:1\"\n  max_replica_lag = \"0s\"\n}", []string{"x.hcl:3", "at least"}},
		{"a typo in a sentinel key suggests the key", "redis \"a\" {\n  sentinels = [\"s1:1\"]\n  master_sett = \"m\"\n}", []string{"x.hcl:3", "Did you mean \"master_set\""}},
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

func TestSentinelMasterConfig(t *testing.T) {
	c, err := Parse([]byte(`
redis "a" {
  sentinels = ["127.0.0.1:26379", "127.0.0.1:26380"]
  master_set = "locks-a"
  sentinel_password = "pw"
  max_replica_lag = "2s"
}
redis "b" { address = "127.0.0.1:2" }
`), "t.hcl")
	if err != nil {
		t.Fatal(err)
	}
	a, b := c.Masters[0], c.Masters[1]
	if !slices.Equal(a.Sentinels, []string{"127.0.0.1:26379", "127.0.0.1:26380"}) || a.MasterSet != "locks-a" || a.SentinelPassword != "pw" ||
		a.ReplicaLag != 2*time.Second || a.Address != "" {
		t.Fatalf("master a: %+v", a)
	}
	if len(b.Sentinels) != 0 || b.ReplicaLag != 0 {
		t.Fatalf("master b: %+v", b)
	}
}
