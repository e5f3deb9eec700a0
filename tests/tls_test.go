package tests

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lock-agent/lock-agent/agent/config"
	"github.com/lock-agent/lock-agent/internal/agenttest"
	"github.com/lock-agent/lock-agent/internal/redistest"
)

// TestMastersOverMutualTLS runs three TLS-only masters that require client
// certificates, and configures the agent through the real HCL loader's tls
// block: locking, WHO and the release message all work; an agent without a
// client certificate is refused.
func TestMastersOverMutualTLS(t *testing.T) {
	dir := t.TempDir()
	files := makeCerts(t, dir)
	servers := redistest.StartTLS(t, 3, files)

	var hcl strings.Builder
	for i, s := range servers {
		fmt.Fprintf(&hcl, "redis \"m%d\" {\n  address = %q\n  tls {\n    ca_file = %q\n    cert_file = %q\n    key_file = %q\n    server_name = \"redis.test\"\n  }\n}\n",
			i, s.Addr, files.CA, filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem"))
	}
	parsed, err := config.Parse([]byte(hcl.String()), "tls.hcl")
	if err != nil {
		t.Fatal(err)
	}
	cfg := agenttest.Config(t, servers, 3*time.Second)
	cfg.Masters = parsed.Masters
	agenttest.Bootstrap(t, cfg)
	a := agenttest.Start(t, cfg)
	c := agenttest.Dial(t, a.Config.Socket.Path)
	waiter := agenttest.Dial(t, a.Config.Socket.Path)
	if r := c.Do("LOCK tls/name"); r.Kind != "OK" {
		t.Fatal(r.Line)
	}
	if r := c.Do("WHO tls/name"); r.Int("n") != 1 {
		t.Fatal(r.Line)
	}
	_, ch := waiter.Send("LOCK tls/name wait=5s")
	waiter.AwaitWaiters(1)
	start := time.Now()
	c.Do("UNLOCK tls/name")
	if r := waiter.Await(ch); r.Kind != "OK" || time.Since(start) > 500*time.Millisecond {
		t.Fatalf("waiter: %s after %v", r.Line, time.Since(start))
	}

	// Without a client certificate the masters refuse the agent.
	for i := range parsed.Masters {
		m := &parsed.Masters[i]
		m.TLS = m.TLS.Clone()
		m.TLS.Certificates = nil
	}
	noCert := agenttest.Config(t, servers, 3*time.Second)
	noCert.Masters = parsed.Masters
	b := agenttest.StartNoWait(t, noCert)
	time.Sleep(700 * time.Millisecond) // several connect attempts and probes: none may succeed
	for _, d := range agenttest.Dial(t, b.Config.Socket.Path).Do("STATUS").Data {
		if d["state"] == "up" {
			t.Fatalf("master %s is up for an agent without a client certificate", d["master"])
		}
	}
}

// makeCerts writes a CA, a server certificate for redis.test and 127.0.0.1,
// and a client certificate, all signed by the CA.
func makeCerts(t *testing.T, dir string) *redistest.TLSFiles {
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "lock-agent test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	leaf := func(name string, serial int64, usage x509.ExtKeyUsage) (string, string) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			DNSNames: []string{"redis.test"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, _ := x509.MarshalECPrivateKey(key)
		return write(name+".pem", "CERTIFICATE", der), write(name+"-key.pem", "EC PRIVATE KEY", keyDER)
	}
	caFile := write("ca.pem", "CERTIFICATE", caDER)
	serverCert, serverKey := leaf("server", 2, x509.ExtKeyUsageServerAuth)
	clientCert, clientKey := leaf("client", 3, x509.ExtKeyUsageClientAuth)
	pair, err := tls.LoadX509KeyPair(clientCert, clientKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return &redistest.TLSFiles{Cert: serverCert, Key: serverKey, CA: caFile,
		Client: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, ServerName: "redis.test"}}
}
