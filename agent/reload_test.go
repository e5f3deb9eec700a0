package agent

import (
	"crypto/tls"
	"reflect"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/quorum"
)

func TestChanges(t *testing.T) {
	base := Default()
	base.Masters = []quorum.MasterConfig{{Name: "a", Address: "h:1", Password: "old", TLS: &tls.Config{ServerName: "r"}}}
	tests := []struct {
		name   string
		change func(*Config)
		want   []Change
	}{
		{"the same file is no change", func(c *Config) {}, nil},
		{"a new log level is applied live", func(c *Config) { c.Log.Level = "debug" }, []Change{{"Log.Level", "info", "debug", true}}},
		{"a limit waits for a restart", func(c *Config) { c.Limits.MaxWaiters = 5 }, []Change{{"Limits.MaxWaiters", "100000", "5", false}}},
		{"several changes are listed in order", func(c *Config) { c.Lock.Lease = time.Second; c.Log.Format = "json" },
			[]Change{{"Lock.Lease", "15s", "1s", false}, {"Log.Format", "text", "json", false}}},
		{"a master's password is a change that is not shown", func(c *Config) {
			c.Masters = []quorum.MasterConfig{{Name: "a", Address: "h:1", Password: "new", TLS: &tls.Config{ServerName: "r"}}}
		}, []Change{{Setting: "Masters"}}},
		{"a reloaded TLS config with the same settings is no change", func(c *Config) {
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
