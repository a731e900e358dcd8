package ruvio

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// RESP3 by default, RESP2 when the server refuses HELLO: a redis-server with HELLO renamed away answers it
// "ERR unknown command", as a server older than RESP3 does.
func TestRESP2FallbackWhenHelloIsRefused(t *testing.T) {
	redisServer := needTool(t, "redis-server")
	dir := t.TempDir()
	p, err := startProc(redisServer, dir, "--dir", dir, "--save", "", "--appendonly", "no", "--bind", "127.0.0.1",
		"--rename-command", "HELLO", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.kill)
	if e, ok := raw(t, p.Addr(), "HELLO", "3").(*Error); !ok || !strings.Contains(e.Message, "unknown command") {
		t.Fatalf("HELLO was not renamed away: %v", e)
	}
	ctx := testCtx(t)
	c := connect(t, Options{Addr: p.Addr(), ClientName: "fallback", DB: 1})
	info := chk(String(c.Do(ctx, "CLIENT", "INFO")))(t)
	if !strings.Contains(info, "resp=2") || !strings.Contains(info, "name=fallback") || !strings.Contains(info, "db=1") {
		t.Fatalf("not a RESP2 connection with its options: %s", info)
	}
	// Protocol 3 demanded: the refusal is an error.
	if _, err := Connect(ctx, Options{Addr: p.Addr(), Protocol: 3}); !errors.Is(err, ErrGeneric) {
		t.Fatalf("Protocol 3 against a server refusing HELLO: %v", err)
	}
}

// TLS against Debian's redis-server with a TLS port and a certificate made here.
func TestTLS(t *testing.T) {
	redisServer := needTool(t, "redis-server")
	dir := t.TempDir()
	certFile, keyFile, pool := makeCert(t, dir)
	mk := func(port int) []string {
		return []string{"--port", "0", "--tls-port", strconv.Itoa(port), "--tls-cert-file", certFile, "--tls-key-file", keyFile,
			"--tls-ca-cert-file", certFile, "--tls-auth-clients", "no", "--dir", dir, "--save", "", "--appendonly", "no", "--bind", "127.0.0.1"}
	}
	var p *proc
	for attempt := 0; attempt < 5 && p == nil; attempt++ {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		cand := &proc{bin: redisServer, mkArgs: mk, port: port, dir: dir, log: filepath.Join(dir, "tls.log")}
		if err := cand.startNoWait(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cand.kill)
		end := time.Now().Add(10 * time.Second)
		for time.Now().Before(end) {
			conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", cand.Addr(), &tls.Config{RootCAs: pool, ServerName: "localhost"})
			if err == nil {
				conn.Close()
				p = cand
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if p == nil {
			log, _ := os.ReadFile(cand.log)
			if strings.Contains(string(log), "not built with TLS") || strings.Contains(string(log), "Unrecognized") {
				t.Fatalf("redis-server has no TLS support: %s", log)
			}
			cand.kill()
		}
	}
	if p == nil {
		t.Fatal("the TLS redis-server did not come up")
	}
	ctx := testCtx(t)
	c := connect(t, Options{Addr: p.Addr(), TLSConfig: &tls.Config{RootCAs: pool, ServerName: "localhost"}})
	chk(c.Do(ctx, "SET", "tls:k", "v"))(t)
	if v, _, _ := c.Get(ctx, "tls:k"); v != "v" {
		t.Fatalf("over TLS: %q", v)
	}
	// The URL form: rediss:// verifies the name it connects to; the test CA is not a system root, so it fails,
	// and fails as unreachable (no command was sent).
	_, err := ConnectURL(ctx, fmt.Sprintf("rediss://localhost:%d", p.port))
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("rediss:// with an unknown CA: %v", err)
	}
	// Plain TCP to a TLS port does not hang: an error within the dial timeout.
	_, err = Connect(ctx, Options{Addr: p.Addr(), DialTimeout: 2 * time.Second})
	if err == nil {
		t.Fatal("plain TCP to a TLS port worked")
	}
}

// startNoWait: the caller waits for the TLS handshake instead of a plain-text PING.
func (p *proc) startNoWait() error { return p.launch() }

func makeCert(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}
