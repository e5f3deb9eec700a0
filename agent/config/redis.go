package config

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/lock-agent/lock-agent/agent"
	"github.com/lock-agent/lock-agent/quorum"
)

// masters checks the redis blocks: at least one, each named once.
func (v *validator) masters(blocks []redisBlock, c *agent.Config) {
	if len(blocks) == 0 {
		v.diags = append(v.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "No redis masters",
			Detail:  "add at least one redis \"NAME\" { address = \"host:port\" } block (or { sentinels = [...]  master_set = \"NAME\" }, or { cluster = [...] }); three or five are what RedLock wants",
			Subject: &hcl.Range{Filename: v.file, Start: hcl.InitialPos, End: hcl.InitialPos}})
		return
	}
	syntax := blocksOf(v.body, "redis")
	seen := map[string]bool{}
	for i, b := range blocks {
		orElse := func(attr string) hcl.Range { return v.rangeOf("redis", b.Name, attr) }
		errorf := v.errorsIn(nth(syntax, i), orElse, "redis", b.Name)
		if seen[b.Name] {
			errorf("", "a second redis block named %q", b.Name)
		}
		seen[b.Name] = true
		c.Masters = append(c.Masters, v.master(b, errorf))
	}
}

// master checks one redis block.
func (v *validator) master(b redisBlock, errorf errorFunc) quorum.MasterConfig {
	m := quorum.MasterConfig{Name: b.Name}
	v.where(b, &m, errorf)
	if b.Username != nil {
		m.Username = *b.Username
	}
	m.Password = password(b, errorf)
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
	return m
}

// password is a redis block's password, given as it is or read from a
// file (without its final line break).
func password(b redisBlock, errorf errorFunc) string {
	switch {
	case b.Password != nil && b.PasswordFile != nil:
		errorf("password_file", "give password or password_file, not both")
	case b.Password != nil:
		return *b.Password
	case b.PasswordFile != nil:
		pw, err := os.ReadFile(*b.PasswordFile)
		if err != nil {
			errorf("password_file", "%v", err)
		}
		return strings.TrimRight(string(pw), "\r\n")
	}
	return ""
}

func (v *validator) tls(t *tlsBlock, errorf errorFunc) *tls.Config {
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
