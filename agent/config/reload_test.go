package config

import (
	"crypto/tls"
	"reflect"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/agent"
	"github.com/lock-agent/lock-agent/agent/acl"
	"github.com/lock-agent/lock-agent/quorum"
)

func TestChanges(t *testing.T) {
	base := agent.Default()
	base.Masters = []quorum.MasterConfig{{Name: "a", Address: "h:1", Password: "old", TLS: &tls.Config{ServerName: "r"}}}
	tests := []struct {
		name   string
		change func(*agent.Config)
		want   []Change
	}{
		{"the same file is no change", func(c *agent.Config) {}, nil},
		{"a new log level is applied live", func(c *agent.Config) { c.Log.Level = "debug" }, []Change{{"Log.Level", "info", "debug", true}}},
		{"a limit is applied live", func(c *agent.Config) { c.Limits.MaxWaiters = 5 }, []Change{{"Limits.MaxWaiters", "100000", "5", true}}},
		{"the idle timeout is applied live", func(c *agent.Config) { c.Limits.IdleTimeout = time.Minute }, []Change{{"Limits.IdleTimeout", "0s", "1m0s", true}}},
		{"new access rules are applied live and shown", func(c *agent.Config) {
			c.ACL = &acl.ACL{Rules: []acl.Rule{{Name: "r", Principal: "uid 7", UID: 7, GID: -1, Verbs: []string{"who"}}}}
		},
			[]Change{{"ACL", "none (anyone who can open the socket may do anything)", `rule "r": uid 7 may who on `, true}}},
		{"the retry_max waits for a restart", func(c *agent.Config) { c.Lock.RetryMax = time.Minute }, []Change{{"Lock.RetryMax", "200ms", "1m0s", false}}},
		{"the deprecated max_ttl is no change: it does nothing", func(c *agent.Config) { c.Lock.MaxTTL = time.Minute }, nil},
		{"several changes are listed in order", func(c *agent.Config) { c.Lock.Lease = time.Second; c.Log.Format = "json" },
			[]Change{{"Lock.Lease", "15s", "1s", false}, {"Log.Format", "text", "json", false}}},
		{"a master's password is a change that is not shown", func(c *agent.Config) {
			c.Masters = []quorum.MasterConfig{{Name: "a", Address: "h:1", Password: "new", TLS: &tls.Config{ServerName: "r"}}}
		}, []Change{{Setting: "Masters"}}},
		{"a reloaded TLS config with the same settings is no change", func(c *agent.Config) {
			c.Masters = []quorum.MasterConfig{{Name: "a", Address: "h:1", Password: "old", TLS: &tls.Config{ServerName: "r"}}}
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next := base
			tt.change(&next)
			if got := Changes(base, next); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestAppliedIsWhatSIGHUPChanges: after a reload, the running config has
// every live change of the file and none of the others, so the next SIGHUP
// reports again only what still waits for a restart.
func TestAppliedIsWhatSIGHUPChanges(t *testing.T) {
	base := agent.Default()
	next := base
	next.Log.Level, next.Log.Format = "debug", "json"
	next.Limits = agent.Limits{MaxSessions: 1, MaxHoldsPerSession: 2, MaxWaiters: 3, MaxSessionsPerUID: 4, IdleTimeout: time.Second}
	next.ACL = &acl.ACL{}
	next.Lock.Lease = time.Second
	var live, restart []string
	for _, c := range Changes(base, next) {
		if c.Live {
			live = append(live, c.Setting)
		} else {
			restart = append(restart, c.Setting)
		}
	}
	if len(live) != 7 || len(restart) != 2 {
		t.Fatalf("live %v, restart %v", live, restart)
	}
	var left []string
	for _, c := range Changes(Applied(base, next), next) {
		left = append(left, c.Setting)
	}
	if !reflect.DeepEqual(left, restart) {
		t.Fatalf("after Applied, still changed: %v; want only %v", left, restart)
	}
}

// TestAnotherClusterSeedNeedsARestart: a master that is a Redis Cluster is
// identified by its seed nodes, as another by its address: another seed
// may be another cluster.
func TestAnotherClusterSeedNeedsARestart(t *testing.T) {
	old := agent.Default()
	old.Masters = []quorum.MasterConfig{{Name: "a", Cluster: []string{"n1:7000", "n2:7000"}}}
	same, next := old, old
	same.Masters = []quorum.MasterConfig{{Name: "a", Cluster: []string{"n1:7000", "n2:7000"}}}
	next.Masters = []quorum.MasterConfig{{Name: "a", Cluster: []string{"n1:7000", "n3:7000"}}}
	if got := Changes(old, same); got != nil {
		t.Errorf("the same seeds: %+v, want no change", got)
	}
	if got, want := Changes(old, next), []Change{{Setting: "Masters"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("another seed: %+v, want %+v (not live, nothing shown)", got, want)
	}
}
