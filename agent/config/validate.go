package config

import (
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/lock-agent/lock-agent/agent"
	"github.com/lock-agent/lock-agent/protocol"
)

// maxCohortHandoffs bounds lock.cohort_max_handoffs: a grant reserves
// cohort_max_handoffs+1 fences, and the fence counter stays behind the
// masters' clock in µs (see quorum/scripts/lua/acquire.lua) only while grants of a
// busy name are further apart than that many µs.
const maxCohortHandoffs = 256

// validator turns the decoded file into an agent.Config, collecting every error
// with the position of the attribute it is about.
type validator struct {
	body  *hclsyntax.Body
	file  string
	diags hcl.Diagnostics
}

// errorFunc records an error about attribute attr ("" for the block
// itself) of one block.
type errorFunc func(attr, format string, args ...any)

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

// errorsIn returns the errorFunc of a labelled block (typ "label") that
// may share its label with another: its errors point into blk, its own
// syntax, or where orElse says when blk is nil.
func (v *validator) errorsIn(blk *hclsyntax.Block, orElse func(attr string) hcl.Range, typ, label string) errorFunc {
	return func(attr, format string, args ...any) {
		var rng hcl.Range
		switch a, ok := blockAttr(blk, attr); {
		case blk == nil:
			rng = orElse(attr)
		case ok:
			rng = a.SrcRange
		default:
			rng = blk.DefRange()
		}
		v.errorAt(rng, typ, label, attr, format, args...)
	}
}

func blockAttr(blk *hclsyntax.Block, attr string) (*hclsyntax.Attribute, bool) {
	if blk == nil {
		return nil, false
	}
	a, ok := blk.Body.Attributes[attr]
	return a, ok
}

// nth returns the i-th of blocks, or nil if there are fewer. The decoded
// blocks of a type are in file order, so the i-th decoded one is the i-th
// syntax block: each error points into its own block even when two share
// a name.
func nth(blocks []*hclsyntax.Block, i int) *hclsyntax.Block {
	if i >= len(blocks) {
		return nil
	}
	return blocks[i]
}

// blocksOf returns the blocks of type typ in body, in file order.
func blocksOf(body *hclsyntax.Body, typ string) []*hclsyntax.Block {
	var out []*hclsyntax.Block
	for _, b := range body.Blocks {
		if b.Type == typ {
			out = append(out, b)
		}
	}
	return out
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

// build checks each block in turn, starting from the defaults: a block
// left out keeps them.
func (v *validator) build(fc *fileConfig) agent.Config {
	c := agent.Default()
	v.agent(fc.Agent, &c)
	v.socket(fc.Socket, &c.Socket)
	v.masters(fc.Redis, &c)
	v.lock(fc.Lock, &c.Lock)
	v.clusterKeyPrefix(&c)
	v.limits(fc.Limits, &c.Limits)
	v.log(fc.Log, &c.Log)
	c.ACL = v.acl(fc.ACL)
	v.systemd(fc.Systemd, &c.Systemd)
	v.telemetry(fc.Telemetry, &c.Telemetry)
	return c
}

func (v *validator) agent(b *agentBlock, c *agent.Config) {
	if b == nil || b.ID == nil {
		return
	}
	c.AgentID = *b.ID
	if c.AgentID == "" || strings.ContainsAny(c.AgentID, " \t\n=") {
		v.errorf("agent", "", "id", "want a non-empty id with no spaces or '='")
	}
}

func (v *validator) socket(s *socketBlock, c *agent.SocketConfig) {
	if s == nil {
		return
	}
	if s.Path != nil {
		c.Path = *s.Path
		if !filepath.IsAbs(c.Path) {
			v.errorf("socket", "", "path", "want an absolute path, got %q", c.Path)
		}
	}
	if s.Mode != nil {
		m, err := strconv.ParseUint(*s.Mode, 8, 32)
		if err != nil || m > 0o777 || m&0o600 != 0o600 {
			v.errorf("socket", "", "mode", "want an octal mode such as \"0660\" that lets the owner read and write, got %q", *s.Mode)
		}
		c.Mode = os.FileMode(m)
	}
	if s.Group != nil {
		c.Group = *s.Group
		if err := groupExists(c.Group); err != nil {
			v.errorf("socket", "", "group", "%v", err)
		}
	}
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

func (v *validator) lock(l *lockBlock, c *agent.LockConfig) {
	if l == nil {
		return
	}
	v.duration("lock", "lease", l.Lease, &c.Lease)
	v.duration("lock", "master_timeout", l.MasterTimeout, &c.MasterTimeout)
	v.duration("lock", "retry_min", l.RetryMin, &c.RetryMin)
	v.duration("lock", "retry_max", l.RetryMax, &c.RetryMax)
	v.duration("lock", "max_ttl", l.MaxTTL, &c.MaxTTL)
	if l.LockDelay != nil && *l.LockDelay != "0" { // "0": none, the default
		v.duration("lock", "lock_delay", l.LockDelay, &c.LockDelay)
	}
	if c.LockDelay > protocol.MaxDelay {
		v.errorf("lock", "", "lock_delay", "want 0 to %v, got %v", protocol.MaxDelay, c.LockDelay)
	}
	if c.MaxTTL < agent.MinTTL {
		v.errorf("lock", "", "max_ttl", "want at least the minimum ttl %v, got %v", agent.MinTTL, c.MaxTTL)
	}
	if l.KeyPrefix != nil {
		c.KeyPrefix = *l.KeyPrefix
	}
	v.cohort(l, c)
	if l.DriftFactor != nil {
		c.DriftFactor = *l.DriftFactor
		if c.DriftFactor < 0 || c.DriftFactor >= 0.5 {
			v.errorf("lock", "", "drift_factor", "want 0 <= drift_factor < 0.5, got %v", c.DriftFactor)
		}
	}
	if c.RetryMin > c.RetryMax {
		v.errorf("lock", "", "retry_min", "retry_min (%v) is above retry_max (%v)", c.RetryMin, c.RetryMax)
	}
	if c.Lease < 100*time.Millisecond {
		v.errorf("lock", "", "lease", "want a lease of at least 100ms, got %v", c.Lease)
	} else if c.MasterTimeout*3 >= c.Lease/3 {
		v.errorf("lock", "", "master_timeout", "master_timeout (%v) must be well under lease/9 (%v) so renewals fit in a lease", c.MasterTimeout, c.Lease/9)
	}
}

// cohort checks the lock block's cohort_ settings; "0" turns either off.
func (v *validator) cohort(l *lockBlock, c *agent.LockConfig) {
	if n := l.CohortMaxHandoffs; n != nil {
		c.CohortMaxHandoffs = *n
		if *n < 0 || *n > maxCohortHandoffs {
			v.errorf("lock", "", "cohort_max_handoffs", "want 0 (off) to %d, got %d", maxCohortHandoffs, *n)
		}
	}
	if d := l.CohortMaxHold; d != nil {
		if *d == "0" {
			c.CohortMaxHold = 0
		} else {
			v.duration("lock", "cohort_max_hold", d, &c.CohortMaxHold)
		}
	}
	if d := l.CacheLinger; d != nil {
		if *d == "0" {
			c.CacheLinger = 0
		} else {
			v.duration("lock", "cache_linger", d, &c.CacheLinger)
		}
	}
}

func (v *validator) limits(l *limitsBlock, c *agent.Limits) {
	if l == nil {
		return
	}
	for _, p := range []struct {
		attr string
		val  *int
		dst  *int
	}{{"max_sessions", l.MaxSessions, &c.MaxSessions}, {"max_holds_per_session", l.MaxHoldsPerSession, &c.MaxHoldsPerSession}, {"max_waiters", l.MaxWaiters, &c.MaxWaiters},
		{"max_sessions_per_uid", l.MaxSessionsPerUID, &c.MaxSessionsPerUID}} {
		if p.val == nil {
			continue
		}
		if *p.val < 1 {
			v.errorf("limits", "", p.attr, "want a positive number, got %d", *p.val)
		}
		*p.dst = *p.val
	}
	v.duration("limits", "idle_timeout", l.IdleTimeout, &c.IdleTimeout)
}

func (v *validator) log(l *logBlock, c *agent.LogConfig) {
	if l == nil {
		return
	}
	if l.Level != nil {
		c.Level = *l.Level
		switch c.Level {
		case "trace", "debug", "info", "warn", "error":
		default:
			v.errorf("log", "", "level", "want trace, debug, info, warn or error, got %q", c.Level)
		}
	}
	if l.Format != nil {
		c.Format = *l.Format
		if c.Format != "text" && c.Format != "json" {
			v.errorf("log", "", "format", "want text or json, got %q", c.Format)
		}
	}
}

func (v *validator) systemd(sd *systemdBlock, c *agent.SystemdConfig) {
	if sd != nil {
		v.duration("systemd", "ready_timeout", sd.ReadyTimeout, &c.ReadyTimeout)
	}
}

func (v *validator) telemetry(b *telemetryBlock, c *agent.TelemetryConfig) {
	if b == nil || b.PrometheusListen == nil {
		return
	}
	c.PrometheusListen = *b.PrometheusListen
	_, port, err := net.SplitHostPort(*b.PrometheusListen)
	if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 1 || n > 65535 {
		v.errorf("telemetry", "", "prometheus_listen", "want host:port such as \"127.0.0.1:9464\", got %q", *b.PrometheusListen)
	}
}
