package agent

import (
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/lock-agent/lock-agent/quorum"
)

// Config is the agent's validated configuration. Start from Default or Dev.
type Config struct {
	// AgentID names this agent in the masters; default the host name.
	AgentID string
	Socket  SocketConfig
	Masters []quorum.MasterConfig
	Lock    LockConfig
	Limits  Limits
	Log     LogConfig
	// ACL is the access rules by peer credentials; nil (no acl block)
	// lets whoever can open the socket do anything.
	ACL     *ACL
	Systemd SystemdConfig
	// Telemetry is the opt-in metrics listener; off by default.
	Telemetry TelemetryConfig
	// Clock is the agent's time: back-off, wait= timers, cohort timing,
	// idle_timeout, and the leases' validity and renewal. nil (the default,
	// and what a config file gives) is the real clock; tests set a
	// quorum.FakeClock.
	Clock quorum.Clock
}

// SocketConfig is where and how the agent listens.
type SocketConfig struct {
	Path  string
	Mode  os.FileMode
	Group string // name or numeric id; "" keeps the agent's group
}

// LockConfig tunes the lock algorithm.
type LockConfig struct {
	// Lease is the watchdog lease, renewed every Lease/3.
	Lease         time.Duration
	KeyPrefix     string
	DriftFactor   float64
	MasterTimeout time.Duration
	// RetryMin and RetryMax bound the jittered back-off between attempts
	// that failed without a clear holder (split votes, unreachable masters).
	RetryMin, RetryMax time.Duration
	// MaxTTL is the longest ttl= a LOCK or EXTEND may ask for; default 5m.
	// With the lease it bounds how long a master that lost its data sits
	// out (see Quarantine): every hold it may have forgotten has ended by then.
	MaxTTL time.Duration
	// CohortMaxHandoffs is how many times a name held in the masters may be
	// passed from one local holder to the next local waiter on the fences of
	// one block (lock cohorting: see cohort.go): each grant, and each further
	// block a run reserves, takes that many fences more. While another agent
	// waits, a run ends within that many hand-overs; otherwise it may reserve
	// further blocks for up to refillFor. Default 128; 0 turns cohorting off.
	CohortMaxHandoffs int
	// CohortMaxHold bounds how long such a run of local holders keeps a name
	// while another agent waits for it: the first release after it is a real
	// one. Default 20ms; 0 turns cohorting off.
	CohortMaxHold time.Duration
}

// maxCohortHandoffs bounds lock.cohort_max_handoffs: a grant reserves
// cohort_max_handoffs+1 fences, and the fence counter stays behind the
// masters' clock in µs (see quorum's acquireSrc) only while grants of a
// busy name are further apart than that many µs.
const maxCohortHandoffs = 256

// Limits bound what clients can make the agent hold.
type Limits struct {
	MaxSessions        int
	MaxHoldsPerSession int
	MaxWaiters         int
	// MaxSessionsPerUID bounds the sessions of one peer uid (SO_PEERCRED),
	// so that one local user cannot take every session; default 1000.
	MaxSessionsPerUID int
	// IdleTimeout closes a session (with * BYE reason=idle) that has had no
	// hold, no wait and no request for that long; 0, the default, never does.
	IdleTimeout time.Duration
}

// LogConfig is the log level and format.
type LogConfig struct {
	Level  string // trace, debug, info, warn, error
	Format string // text or json
}

// SystemdConfig is how the agent talks to systemd when it runs as a
// Type=notify service; without NOTIFY_SOCKET it is unused.
type SystemdConfig struct {
	// ReadyTimeout is how long READY=1 waits for a quorum of masters once
	// the socket listens; then READY=1 is sent anyway, with STATUS= saying
	// there is no quorum. Default 30s.
	ReadyTimeout time.Duration
}

// DefaultSocketPath is where a production agent listens.
const DefaultSocketPath = "/run/lock-agent/agent.sock"

// Default returns the production defaults. It has no masters: a config file
// must name at least one.
func Default() Config {
	host, _ := os.Hostname()
	return Config{
		AgentID: host,
		Socket:  SocketConfig{Path: DefaultSocketPath, Mode: 0o660},
		Lock: LockConfig{Lease: 15 * time.Second, KeyPrefix: "lock-agent:", DriftFactor: 0.01,
			MasterTimeout: 50 * time.Millisecond, RetryMin: 20 * time.Millisecond, RetryMax: 200 * time.Millisecond,
			MaxTTL: 5 * time.Minute, CohortMaxHandoffs: 128, CohortMaxHold: 20 * time.Millisecond},
		Limits:  Limits{MaxSessions: 10000, MaxHoldsPerSession: 1000, MaxWaiters: 100000, MaxSessionsPerUID: 1000},
		Log:     LogConfig{Level: "info", Format: "text"},
		Systemd: SystemdConfig{ReadyTimeout: 30 * time.Second},
	}
}

// Dev returns the -dev configuration: the defaults, a socket in the user's
// runtime directory, and the given embedded masters.
func Dev(masterAddrs []string) Config {
	c := Default()
	c.Socket.Path = DevSocketPath()
	c.Socket.Mode = 0o600
	for i, a := range masterAddrs {
		c.Masters = append(c.Masters, quorum.MasterConfig{Name: fmt.Sprintf("dev%d", i+1), Address: a})
	}
	return c
}

// DevSocketPath is the socket of `run -dev`: $XDG_RUNTIME_DIR/lock-agent/agent.sock,
// or /tmp/lock-agent-UID/agent.sock.
func DevSocketPath() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "lock-agent", "agent.sock")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("lock-agent-%d", os.Getuid()), "agent.sock")
}

// The HCL file's shape. Decoding is strict: no remain fields, so an unknown
// block or attribute is an error at its file:line.
type fileConfig struct {
	Agent   *agentBlock   `hcl:"agent,block"`
	Socket  *socketBlock  `hcl:"socket,block"`
	Redis   []redisBlock  `hcl:"redis,block"`
	Lock    *lockBlock    `hcl:"lock,block"`
	Limits  *limitsBlock  `hcl:"limits,block"`
	Log     *logBlock     `hcl:"log,block"`
	ACL     *aclBlock     `hcl:"acl,block"`
	Systemd *systemdBlock `hcl:"systemd,block"`
	// Telemetry is decoded and checked in telemetry.go.
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
	Name         string  `hcl:"name,label"`
	Address      string  `hcl:"address"`
	Username     *string `hcl:"username,optional"`
	Password     *string `hcl:"password,optional"`
	PasswordFile *string `hcl:"password_file,optional"`
	DB           *int    `hcl:"db,optional"`
	// AllowReplicas accepts this master with replicas attached.
	AllowReplicas *bool     `hcl:"allow_replicas,optional"`
	TLS           *tlsBlock `hcl:"tls,block"`
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
	// CohortMaxHandoffs and CohortMaxHold: see LockConfig.
	CohortMaxHandoffs *int    `hcl:"cohort_max_handoffs,optional"`
	CohortMaxHold     *string `hcl:"cohort_max_hold,optional"`
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

// Load reads and validates an HCL config file. Every problem is reported,
// each with its file:line, in one hcl.Diagnostics error.
func Load(path string) (Config, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return Config{}, err
	}
	return Parse(src, path)
}

// Parse is Load on bytes; filename is used in error positions.
func Parse(src []byte, filename string) (Config, error) {
	file, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if diags.HasErrors() {
		return Config{}, &ConfigError{diags}
	}
	// Decoding goes on past an unknown or mistyped attribute, so the values
	// it did decode are still checked: one run reports every error.
	var fc fileConfig
	decodeDiags := gohcl.DecodeBody(file.Body, nil, &fc)
	v := validator{body: file.Body.(*hclsyntax.Body), file: filename}
	c := v.build(&fc)
	if diags := mergeDiags(decodeDiags, v.diags); diags.HasErrors() {
		return Config{}, &ConfigError{diags}
	}
	return c, nil
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

// ConfigError is every problem found in a config file.
type ConfigError struct {
	Diags hcl.Diagnostics
}

// Error lists each problem on its own line as "file:line: summary: detail".
func (e *ConfigError) Error() string {
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

// validator turns the decoded file into a Config, collecting every error
// with the position of the attribute it is about.
type validator struct {
	body  *hclsyntax.Body
	file  string
	diags hcl.Diagnostics
}

// errorf records an error about attribute attr of the block of type typ
// (and label, for labelled blocks).
func (v *validator) errorf(typ, label, attr, format string, args ...any) {
	v.errorAt(v.rangeOf(typ, label, attr), typ, label, attr, format, args...)
}

// errorAt is errorf at a given position.
func (v *validator) errorAt(rng hcl.Range, typ, label, attr, format string, args ...any) {
	key := typ
	if label != "" {
		key += " \"" + label + "\""
	}
	if attr != "" {
		key += "." + attr
	}
	v.diags = append(v.diags, &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Invalid " + key,
		Detail:   fmt.Sprintf(format, args...),
		Subject:  &rng,
	})
}

func (v *validator) rangeOf(typ, label, attr string) hcl.Range {
	for _, b := range v.body.Blocks {
		if b.Type != typ || (label != "" && (len(b.Labels) == 0 || b.Labels[0] != label)) {
			continue
		}
		if a, ok := b.Body.Attributes[attr]; ok {
			return a.SrcRange
		}
		return b.DefRange()
	}
	return hcl.Range{Filename: v.file, Start: hcl.InitialPos, End: hcl.InitialPos}
}

func (v *validator) duration(typ, attr string, s *string, dst *time.Duration) {
	if s == nil {
		return
	}
	d, err := time.ParseDuration(*s)
	if err != nil || d <= 0 {
		v.errorf(typ, "", attr, "want a positive Go duration such as \"15s\", got %q", *s)
		return
	}
	*dst = d
}

func (v *validator) build(fc *fileConfig) Config {
	c := Default()
	if fc.Agent != nil && fc.Agent.ID != nil {
		c.AgentID = *fc.Agent.ID
		if c.AgentID == "" || strings.ContainsAny(c.AgentID, " \t\n=") {
			v.errorf("agent", "", "id", "want a non-empty id with no spaces or '='")
		}
	}
	if s := fc.Socket; s != nil {
		if s.Path != nil {
			c.Socket.Path = *s.Path
			if !filepath.IsAbs(c.Socket.Path) {
				v.errorf("socket", "", "path", "want an absolute path, got %q", c.Socket.Path)
			}
		}
		if s.Mode != nil {
			m, err := strconv.ParseUint(*s.Mode, 8, 32)
			if err != nil || m > 0o777 || m&0o600 != 0o600 {
				v.errorf("socket", "", "mode", "want an octal mode such as \"0660\" that lets the owner read and write, got %q", *s.Mode)
			}
			c.Socket.Mode = os.FileMode(m)
		}
		if s.Group != nil {
			c.Socket.Group = *s.Group
			if err := groupExists(c.Socket.Group); err != nil {
				v.errorf("socket", "", "group", "%v", err)
			}
		}
	}
	v.masters(fc.Redis, &c)
	if l := fc.Lock; l != nil {
		v.duration("lock", "lease", l.Lease, &c.Lock.Lease)
		v.duration("lock", "master_timeout", l.MasterTimeout, &c.Lock.MasterTimeout)
		v.duration("lock", "retry_min", l.RetryMin, &c.Lock.RetryMin)
		v.duration("lock", "retry_max", l.RetryMax, &c.Lock.RetryMax)
		v.duration("lock", "max_ttl", l.MaxTTL, &c.Lock.MaxTTL)
		if c.Lock.MaxTTL < MinTTL {
			v.errorf("lock", "", "max_ttl", "want at least the minimum ttl %v, got %v", MinTTL, c.Lock.MaxTTL)
		}
		if l.KeyPrefix != nil {
			c.Lock.KeyPrefix = *l.KeyPrefix
		}
		if n := l.CohortMaxHandoffs; n != nil {
			c.Lock.CohortMaxHandoffs = *n
			if *n < 0 || *n > maxCohortHandoffs {
				v.errorf("lock", "", "cohort_max_handoffs", "want 0 (off) to %d, got %d", maxCohortHandoffs, *n)
			}
		}
		if d := l.CohortMaxHold; d != nil {
			if *d == "0" {
				c.Lock.CohortMaxHold = 0
			} else {
				v.duration("lock", "cohort_max_hold", d, &c.Lock.CohortMaxHold)
			}
		}
		if l.DriftFactor != nil {
			c.Lock.DriftFactor = *l.DriftFactor
			if c.Lock.DriftFactor < 0 || c.Lock.DriftFactor >= 0.5 {
				v.errorf("lock", "", "drift_factor", "want 0 <= drift_factor < 0.5, got %v", c.Lock.DriftFactor)
			}
		}
		if c.Lock.RetryMin > c.Lock.RetryMax {
			v.errorf("lock", "", "retry_min", "retry_min (%v) is above retry_max (%v)", c.Lock.RetryMin, c.Lock.RetryMax)
		}
		if c.Lock.Lease < 100*time.Millisecond {
			v.errorf("lock", "", "lease", "want a lease of at least 100ms, got %v", c.Lock.Lease)
		} else if c.Lock.MasterTimeout*3 >= c.Lock.Lease/3 {
			v.errorf("lock", "", "master_timeout", "master_timeout (%v) must be well under lease/9 (%v) so renewals fit in a lease", c.Lock.MasterTimeout, c.Lock.Lease/9)
		}
	}
	if l := fc.Limits; l != nil {
		for _, p := range []struct {
			attr string
			val  *int
			dst  *int
		}{{"max_sessions", l.MaxSessions, &c.Limits.MaxSessions}, {"max_holds_per_session", l.MaxHoldsPerSession, &c.Limits.MaxHoldsPerSession}, {"max_waiters", l.MaxWaiters, &c.Limits.MaxWaiters},
			{"max_sessions_per_uid", l.MaxSessionsPerUID, &c.Limits.MaxSessionsPerUID}} {
			if p.val == nil {
				continue
			}
			if *p.val < 1 {
				v.errorf("limits", "", p.attr, "want a positive number, got %d", *p.val)
			}
			*p.dst = *p.val
		}
		v.duration("limits", "idle_timeout", l.IdleTimeout, &c.Limits.IdleTimeout)
	}
	if l := fc.Log; l != nil {
		if l.Level != nil {
			c.Log.Level = *l.Level
			switch c.Log.Level {
			case "trace", "debug", "info", "warn", "error":
			default:
				v.errorf("log", "", "level", "want trace, debug, info, warn or error, got %q", c.Log.Level)
			}
		}
		if l.Format != nil {
			c.Log.Format = *l.Format
			if c.Log.Format != "text" && c.Log.Format != "json" {
				v.errorf("log", "", "format", "want text or json, got %q", c.Log.Format)
			}
		}
	}
	c.ACL = v.acl(fc.ACL)
	if sd := fc.Systemd; sd != nil {
		v.duration("systemd", "ready_timeout", sd.ReadyTimeout, &c.Systemd.ReadyTimeout)
	}
	v.telemetry(fc.Telemetry, &c)
	return c
}

func (v *validator) masters(blocks []redisBlock, c *Config) {
	if len(blocks) == 0 {
		v.diags = append(v.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "No redis masters",
			Detail:  "add at least one redis \"NAME\" { address = \"host:port\" } block; three or five are what RedLock wants",
			Subject: &hcl.Range{Filename: v.file, Start: hcl.InitialPos, End: hcl.InitialPos}})
		return
	}
	// The decoded blocks are in file order: the i-th is the i-th redis
	// block of the body, so each error points into its own block even when
	// two share a name.
	var syntax []*hclsyntax.Block
	for _, b := range v.body.Blocks {
		if b.Type == "redis" {
			syntax = append(syntax, b)
		}
	}
	seen := map[string]bool{}
	for i, b := range blocks {
		at := func(attr string) hcl.Range {
			if i >= len(syntax) {
				return v.rangeOf("redis", b.Name, attr)
			}
			if a, ok := syntax[i].Body.Attributes[attr]; ok {
				return a.SrcRange
			}
			return syntax[i].DefRange()
		}
		errorf := func(attr, format string, args ...any) {
			v.errorAt(at(attr), "redis", b.Name, attr, format, args...)
		}
		if seen[b.Name] {
			errorf("", "a second redis block named %q", b.Name)
		}
		seen[b.Name] = true
		m := quorum.MasterConfig{Name: b.Name, Address: b.Address}
		if host, port, ok := strings.Cut(b.Address, ":"); !ok || host == "" || port == "" {
			errorf("address", "want host:port, got %q", b.Address)
		}
		if b.Username != nil {
			m.Username = *b.Username
		}
		switch {
		case b.Password != nil && b.PasswordFile != nil:
			errorf("password_file", "give password or password_file, not both")
		case b.Password != nil:
			m.Password = *b.Password
		case b.PasswordFile != nil:
			pw, err := os.ReadFile(*b.PasswordFile)
			if err != nil {
				errorf("password_file", "%v", err)
			}
			m.Password = strings.TrimRight(string(pw), "\r\n")
		}
		if b.DB != nil {
			if *b.DB < 0 {
				errorf("db", "want a database number >= 0")
			}
			m.DB = *b.DB
		}
		if b.AllowReplicas != nil {
			m.AllowReplicas = *b.AllowReplicas
		}
		if b.TLS != nil {
			m.TLS = v.tls(b.TLS, errorf)
		}
		c.Masters = append(c.Masters, m)
	}
}

func (v *validator) tls(t *tlsBlock, errorf func(attr, format string, args ...any)) *tls.Config {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if t.ServerName != nil {
		cfg.ServerName = *t.ServerName
	}
	if t.CAFile != nil {
		pem, err := os.ReadFile(*t.CAFile)
		pool := x509.NewCertPool()
		if err != nil || !pool.AppendCertsFromPEM(pem) {
			errorf("tls", "ca_file %q: no PEM certificates could be read (%v)", *t.CAFile, err)
		}
		cfg.RootCAs = pool
	}
	if (t.CertFile == nil) != (t.KeyFile == nil) {
		errorf("tls", "cert_file and key_file go together")
	} else if t.CertFile != nil {
		cert, err := tls.LoadX509KeyPair(*t.CertFile, *t.KeyFile)
		if err != nil {
			errorf("tls", "client certificate: %v", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg
}

// groupExists checks a socket group: a name must exist on this host (the
// agent would fail at start otherwise); a number is taken as it is.
func groupExists(group string) error {
	if _, err := strconv.Atoi(group); err == nil {
		return nil
	}
	if _, err := user.LookupGroup(group); err != nil {
		return fmt.Errorf("no group %q on this host (create it with groupadd, or give a numeric gid)", group)
	}
	return nil
}
