package config

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/lock-agent/lock-agent/agent"
	"github.com/lock-agent/lock-agent/quorum"
)

// Change is one setting that differs between the running config and a
// reloaded one.
type Change struct {
	Setting  string // Go path of the setting, e.g. "Log.Level", "Limits.MaxSessions"
	Old, New string // "" for settings whose values are not shown (masters: passwords)
	// Live is true for settings a SIGHUP applies to the running agent.
	// The others take effect on the next start.
	Live bool
}

// liveSettings can change while the agent runs: the log level (the
// command's logger) and what agent.Agent.SetLive applies. Everything else shapes
// what is already open (socket, masters, leases held under the old values),
// so it needs a restart.
var liveSettings = map[string]bool{"Log.Level": true,
	"Limits.MaxSessions": true, "Limits.MaxHoldsPerSession": true, "Limits.MaxWaiters": true,
	"Limits.MaxSessionsPerUID": true, "Limits.IdleTimeout": true, "ACL": true}

// Applied returns running with the live settings taken from next: the
// config an agent runs with once a SIGHUP applied next.
func Applied(running, next agent.Config) agent.Config {
	running.Log.Level = next.Log.Level
	running.Limits = next.Limits
	running.ACL = next.ACL
	return running
}

// Changes lists every setting that differs between old and new, in the
// order of the Config struct. It is what SIGHUP reports and applies.
func Changes(old, new agent.Config) []Change {
	var out []Change
	diff(reflect.ValueOf(old), reflect.ValueOf(new), "", &out)
	return out
}

// ignoredSettings are the Config fields of deprecated settings (see
// deprecated): a change of one changes nothing, now or on restart, and a
// reload names it as a Warning instead.
var ignoredSettings = map[string]bool{"Lock.MaxTTL": true}

func diff(o, n reflect.Value, path string, out *[]Change) {
	if o.Kind() == reflect.Struct && path != "Masters" {
		for i := range o.NumField() {
			name := o.Type().Field(i).Name
			if path != "" {
				name = path + "." + name
			}
			diff(o.Field(i), n.Field(i), name, out)
		}
		return
	}
	if path == "Masters" {
		o, n = reflect.ValueOf(masterKeys(o.Interface().([]quorum.MasterConfig))), reflect.ValueOf(masterKeys(n.Interface().([]quorum.MasterConfig)))
	}
	if reflect.DeepEqual(o.Interface(), n.Interface()) || ignoredSettings[path] {
		return
	}
	c := Change{Setting: path, Live: liveSettings[path]}
	if path != "Masters" { // may carry passwords
		c.Old, c.New = fmt.Sprint(o.Interface()), fmt.Sprint(n.Interface())
	}
	*out = append(*out, c)
}

// masterKey is what identifies a master's connection. A TLS config is
// compared by whether there is one and its server name: two loads of the
// same files never compare equal as values.
type masterKey struct {
	Name, Address, Username, Password string
	DB                                int
	TLS                               bool
	ServerName                        string
	// A Sentinel master's: its Sentinels (joined), master set, Sentinel
	// credentials, and replica lag (its quarantine depends on it).
	Sentinels, MasterSet, SentinelUsername, SentinelPassword string
	ReplicaLag                                               time.Duration
	// A Redis Cluster master's: its seed nodes (joined). Another seed
	// may be another cluster, so a change needs a restart, as an address.
	Cluster string
}

func masterKeys(ms []quorum.MasterConfig) []masterKey {
	keys := make([]masterKey, len(ms))
	for i, m := range ms {
		keys[i] = masterKey{Name: m.Name, Address: m.Address, Username: m.Username, Password: m.Password, DB: m.DB, TLS: m.TLS != nil}
		if m.TLS != nil {
			keys[i].ServerName = m.TLS.ServerName
		}
		keys[i].Sentinels, keys[i].MasterSet = strings.Join(m.Sentinels, ","), m.MasterSet
		keys[i].SentinelUsername, keys[i].SentinelPassword, keys[i].ReplicaLag = m.SentinelUsername, m.SentinelPassword, m.ReplicaLag
		keys[i].Cluster = strings.Join(m.Cluster, ",")
	}
	return keys
}
