// Package config is the agent's config file: the HCL shape decoded by gohcl,
// its validation into an agent.Config (every error collected, each naming
// its key and line), and what a reload of the file changes. `lock-agent run`,
// `validate`, `bootstrap` and SIGHUP all load it with Load.
package config

import (
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
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
	"github.com/lock-agent/lock-agent/agent"
	"github.com/lock-agent/lock-agent/agent/acl"
	"github.com/lock-agent/lock-agent/quorum"
)

// maxCohortHandoffs bounds lock.cohort_max_handoffs: a grant reserves
// cohort_max_handoffs+1 fences, and the fence counter stays behind the
// masters' clock in µs (see quorum's acquireSrc) only while grants of a
// busy name are further apart than that many µs.
const maxCohortHandoffs = 256

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
	// CohortMaxHandoffs and CohortMaxHold: see agent.LockConfig.
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
func Load(path string) (agent.Config, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return agent.Config{}, err
	}
	return Parse(src, path)
}

// Parse is Load on bytes; filename is used in error positions.
func Parse(src []byte, filename string) (agent.Config, error) {
	file, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if diags.HasErrors() {
		return agent.Config{}, &Error{diags}
	}
	// Decoding goes on past an unknown or mistyped attribute, so the values
	// it did decode are still checked: one run reports every error.
	var fc fileConfig
	decodeDiags := gohcl.DecodeBody(file.Body, nil, &fc)
	v := validator{body: file.Body.(*hclsyntax.Body), file: filename}
	c := v.build(&fc)
	if diags := mergeDiags(decodeDiags, v.diags); diags.HasErrors() {
		return agent.Config{}, &Error{diags}
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

// validator turns the decoded file into an agent.Config, collecting every error
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

func (v *validator) build(fc *fileConfig) agent.Config {
	c := agent.Default()
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
		if c.Lock.MaxTTL < agent.MinTTL {
			v.errorf("lock", "", "max_ttl", "want at least the minimum ttl %v, got %v", agent.MinTTL, c.Lock.MaxTTL)
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

func (v *validator) masters(blocks []redisBlock, c *agent.Config) {
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

type telemetryBlock struct {
	PrometheusListen *string `hcl:"prometheus_listen,optional"`
}

func (v *validator) telemetry(b *telemetryBlock, c *agent.Config) {
	if b == nil || b.PrometheusListen == nil {
		return
	}
	c.Telemetry.PrometheusListen = *b.PrometheusListen
	_, port, err := net.SplitHostPort(*b.PrometheusListen)
	if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 1 || n > 65535 {
		v.errorf("telemetry", "", "prometheus_listen", "want host:port such as \"127.0.0.1:9464\", got %q", *b.PrometheusListen)
	}
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

// acl turns the acl block into rules, looking up users and groups given by
// name: one that does not exist on this host is an error at its line.
func (v *validator) acl(b *aclBlock) *acl.ACL {
	if b == nil {
		return nil
	}
	// As for masters: the i-th decoded rule is the i-th rule block.
	var syntax []*hclsyntax.Block
	for _, blk := range v.body.Blocks {
		if blk.Type == "acl" {
			for _, r := range blk.Body.Blocks {
				if r.Type == "rule" {
					syntax = append(syntax, r)
				}
			}
			break
		}
	}
	rules := &acl.ACL{Rules: []acl.Rule{}}
	seen := map[string]bool{}
	for i, rb := range b.Rules {
		at := func(attr string) hcl.Range {
			if i >= len(syntax) {
				return v.rangeOf("acl", "", "")
			}
			if a, ok := syntax[i].Body.Attributes[attr]; ok {
				return a.SrcRange
			}
			return syntax[i].DefRange()
		}
		errorf := func(attr, format string, args ...any) {
			v.errorAt(at(attr), "acl rule", rb.Name, attr, format, args...)
		}
		if seen[rb.Name] {
			errorf("", "a second rule named %q", rb.Name)
		}
		seen[rb.Name] = true
		rules.Rules = append(rules.Rules, v.rule(rb, errorf))
	}
	return rules
}

func (v *validator) rule(rb aclRuleBlock, errorf func(attr, format string, args ...any)) acl.Rule {
	r := acl.Rule{Name: rb.Name, UID: -1, GID: -1}
	var given []string
	if rb.User != nil {
		given = append(given, "user")
		if u, err := user.Lookup(*rb.User); err != nil {
			errorf("user", "no user %q on this host (give an existing user, or its uid)", *rb.User)
		} else {
			r.UID, _ = strconv.Atoi(u.Uid)
			r.Principal = fmt.Sprintf("user %s (%s)", *rb.User, u.Uid)
		}
	}
	if rb.UID != nil {
		given = append(given, "uid")
		if r.UID, r.Principal = *rb.UID, fmt.Sprintf("uid %d", *rb.UID); r.UID < 0 {
			errorf("uid", "want a uid >= 0, got %d", r.UID)
		}
	}
	if rb.Group != nil {
		given = append(given, "group")
		if g, err := user.LookupGroup(*rb.Group); err != nil {
			errorf("group", "no group %q on this host (give an existing group, or its gid)", *rb.Group)
		} else {
			r.GID, _ = strconv.Atoi(g.Gid)
			r.Principal = fmt.Sprintf("group %s (%s)", *rb.Group, g.Gid)
		}
	}
	if rb.GID != nil {
		given = append(given, "gid")
		if r.GID, r.Principal = *rb.GID, fmt.Sprintf("gid %d", *rb.GID); r.GID < 0 {
			errorf("gid", "want a gid >= 0, got %d", r.GID)
		}
	}
	switch {
	case len(given) == 0:
		errorf("", "the rule is for no one: give one of user, uid, group or gid")
	case len(given) > 1:
		errorf(given[1], "give one of user, uid, group or gid, not %s", strings.Join(given, " and "))
	}
	if rb.Names == nil || len(*rb.Names) == 0 {
		errorf("names", "give the names the rule allows, as globs such as [\"jobs/*\"]; [\"**\"] is every name")
	} else {
		for _, p := range *rb.Names {
			g, err := acl.ParseGlob(p)
			if err != nil {
				errorf("names", "%v", err)
				continue
			}
			r.Names = append(r.Names, g)
		}
	}
	r.Verbs = acl.RuleVerbs
	if rb.Verbs != nil {
		r.Verbs = nil
		if len(*rb.Verbs) == 0 {
			errorf("verbs", "an empty verbs list allows nothing; leave verbs out for all of %s", strings.Join(acl.RuleVerbs, ", "))
		}
		for _, verb := range *rb.Verbs {
			verb = strings.ToLower(verb)
			switch {
			case slices.Contains(acl.RuleVerbs, verb):
				if !slices.Contains(r.Verbs, verb) {
					r.Verbs = append(r.Verbs, verb)
				}
			case slices.Contains(acl.AlwaysAllowed, verb):
				errorf("verbs", "%s is always allowed; rules govern %s", verb, strings.Join(acl.RuleVerbs, ", "))
			default:
				errorf("verbs", "unknown verb %q: want %s", verb, strings.Join(acl.RuleVerbs, ", "))
			}
		}
	}
	return r
}
