// Package config is the agent's config file: the HCL shape decoded by gohcl,
// its validation into an agent.Config (every error collected, each naming
// its key and line), and what a reload of the file changes. `lock-agent run`,
// `validate`, `bootstrap` and SIGHUP all load it with Load.
package config

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/lock-agent/lock-agent/agent"
)

// The HCL file's shape. Decoding is strict: no remain fields, so an unknown
// block or attribute is an error at its file:line.
type fileConfig struct {
	Agent     *agentBlock     `hcl:"agent,block"`
	Socket    *socketBlock    `hcl:"socket,block"`
	Redis     []redisBlock    `hcl:"redis,block"`
	Lock      *lockBlock      `hcl:"lock,block"`
	Limits    *limitsBlock    `hcl:"limits,block"`
	Log       *logBlock       `hcl:"log,block"`
	ACL       *aclBlock       `hcl:"acl,block"`
	Systemd   *systemdBlock   `hcl:"systemd,block"`
	Telemetry *telemetryBlock `hcl:"telemetry,block"`
}

type agentBlock struct {
	ID *string `hcl:"id,optional"`
}

type socketBlock struct {
	Path  *string `hcl:"path,optional"`
	Mode  *string `hcl:"mode,optional"`
	Group *string `hcl:"group,optional"`
}

type redisBlock struct {
	Name string `hcl:"name,label"`
	// Address, Sentinels and MasterSet (see sentinel.go), or Cluster (see
	// cluster.go): one of them.
	Address      *string `hcl:"address,optional"`
	Username     *string `hcl:"username,optional"`
	Password     *string `hcl:"password,optional"`
	PasswordFile *string `hcl:"password_file,optional"`
	DB           *int    `hcl:"db,optional"`
	// AllowReplicas accepts this master with replicas attached.
	AllowReplicas *bool `hcl:"allow_replicas,optional"`
	// Sentinels, MasterSet, SentinelUsername, SentinelPassword and
	// MaxReplicaLag: see quorum.MasterConfig.
	Sentinels        []string  `hcl:"sentinels,optional"`
	MasterSet        *string   `hcl:"master_set,optional"`
	SentinelUsername *string   `hcl:"sentinel_username,optional"`
	SentinelPassword *string   `hcl:"sentinel_password,optional"`
	MaxReplicaLag    *string   `hcl:"max_replica_lag,optional"`
	TLS              *tlsBlock `hcl:"tls,block"`

	// Cluster: the seed nodes of a Redis Cluster that is this master. A
	// pointer, so that an empty list is told from none.
	Cluster *[]string `hcl:"cluster,optional"`
}

type tlsBlock struct {
	CAFile     *string `hcl:"ca_file,optional"`
	CertFile   *string `hcl:"cert_file,optional"`
	KeyFile    *string `hcl:"key_file,optional"`
	ServerName *string `hcl:"server_name,optional"`
}

type lockBlock struct {
	Lease         *string  `hcl:"lease,optional"`
	KeyPrefix     *string  `hcl:"key_prefix,optional"`
	DriftFactor   *float64 `hcl:"drift_factor,optional"`
	MasterTimeout *string  `hcl:"master_timeout,optional"`
	RetryMin      *string  `hcl:"retry_min,optional"`
	RetryMax      *string  `hcl:"retry_max,optional"`
	MaxTTL        *string  `hcl:"max_ttl,optional"`
	LockDelay     *string  `hcl:"lock_delay,optional"`
	// CohortMaxHandoffs and CohortMaxHold: see agent.LockConfig.
	CohortMaxHandoffs *int    `hcl:"cohort_max_handoffs,optional"`
	CohortMaxHold     *string `hcl:"cohort_max_hold,optional"`
	// CacheLinger: see agent.LockConfig.
	CacheLinger *string `hcl:"cache_linger,optional"`
}

type limitsBlock struct {
	MaxSessions        *int    `hcl:"max_sessions,optional"`
	MaxHoldsPerSession *int    `hcl:"max_holds_per_session,optional"`
	MaxWaiters         *int    `hcl:"max_waiters,optional"`
	MaxSessionsPerUID  *int    `hcl:"max_sessions_per_uid,optional"`
	IdleTimeout        *string `hcl:"idle_timeout,optional"`
}

type systemdBlock struct {
	ReadyTimeout *string `hcl:"ready_timeout,optional"`
}

type logBlock struct {
	Level  *string `hcl:"level,optional"`
	Format *string `hcl:"format,optional"`
}

type telemetryBlock struct {
	PrometheusListen *string `hcl:"prometheus_listen,optional"`
}

// The acl block's shape in the file.
type aclBlock struct {
	Rules []aclRuleBlock `hcl:"rule,block"`
}

type aclRuleBlock struct {
	Name  string    `hcl:"name,label"`
	User  *string   `hcl:"user,optional"`
	UID   *int      `hcl:"uid,optional"`
	Group *string   `hcl:"group,optional"`
	GID   *int      `hcl:"gid,optional"`
	Names *[]string `hcl:"names,optional"`
	Verbs *[]string `hcl:"verbs,optional"`
}

// Load reads and validates an HCL config file. Every problem is reported,
// each with its file:line, in one hcl.Diagnostics error.
func Load(path string) (agent.Config, error) {
	c, _, err := LoadWarned(path)
	return c, err
}

// LoadWarned is Load, and the deprecated settings the file sets (see
// Warning): what validate and run use.
func LoadWarned(path string) (agent.Config, []Warning, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return agent.Config{}, nil, err
	}
	return ParseWarned(src, path)
}

// Parse is Load on bytes; filename is used in error positions.
func Parse(src []byte, filename string) (agent.Config, error) {
	c, _, err := ParseWarned(src, filename)
	return c, err
}

// ParseWarned is LoadWarned on bytes.
func ParseWarned(src []byte, filename string) (agent.Config, []Warning, error) {
	file, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if diags.HasErrors() {
		return agent.Config{}, nil, &Error{diags}
	}
	// Decoding goes on past an unknown or mistyped attribute, so the values
	// it did decode are still checked: one run reports every error.
	var fc fileConfig
	decodeDiags := gohcl.DecodeBody(file.Body, nil, &fc)
	v := validator{body: file.Body.(*hclsyntax.Body), file: filename}
	c := v.build(&fc)
	if diags := mergeDiags(decodeDiags, v.diags); diags.HasErrors() {
		return agent.Config{}, nil, &Error{diags}
	}
	return c, v.warnings(), nil
}

// mergeDiags returns the decoder's errors, then the validator's on lines the
// decoder had nothing to say about (a missing attribute is one error, not
// also an invalid empty value), sorted by position.
func mergeDiags(decoded, validated hcl.Diagnostics) hcl.Diagnostics {
	lines := map[int]bool{}
	for _, d := range decoded {
		if d.Subject != nil {
			lines[d.Subject.Start.Line] = true
		}
	}
	out := append(hcl.Diagnostics{}, decoded...)
	for _, d := range validated {
		if d.Subject == nil || !lines[d.Subject.Start.Line] {
			out = append(out, d)
		}
	}
	slices.SortStableFunc(out, func(a, b *hcl.Diagnostic) int {
		return cmp.Compare(line(a), line(b))
	})
	return out
}

func line(d *hcl.Diagnostic) int {
	if d.Subject == nil {
		return 0
	}
	return d.Subject.Start.Line
}

// Error is every problem found in a config file.
type Error struct {
	Diags hcl.Diagnostics
}

// Error lists each problem on its own line as "file:line: summary: detail".
func (e *Error) Error() string {
	var b strings.Builder
	for i, d := range e.Diags {
		if i > 0 {
			b.WriteByte('\n')
		}
		if d.Subject != nil {
			fmt.Fprintf(&b, "%s:%d: ", d.Subject.Filename, d.Subject.Start.Line)
		}
		b.WriteString(d.Summary)
		if d.Detail != "" {
			b.WriteString(": " + d.Detail)
		}
	}
	return b.String()
}
