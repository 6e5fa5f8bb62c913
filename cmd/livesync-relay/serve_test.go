package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/engine/livesync"
)

// selfSigned writes a certificate for 127.0.0.1 and its key into dir and
// returns a pool that trusts it.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "livesync-relay test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

func TestTLS(t *testing.T) {
	dir := t.TempDir()
	_, _, pool := selfSigned(t, dir)
	cfg := filepath.Join(dir, "relay.toml")
	os.WriteFile(cfg, []byte("[tls]\ncert_file = \"cert.pem\"\nkey_file = \"key.pem\"\n"), 0o600)
	rn := startAdmin(t, filepath.Join(dir, "data"), "--config", cfg)
	if !strings.HasPrefix(rn.url, "https://127.0.0.1:") || !strings.Contains(rn.out.String(), "URI:            https://") {
		t.Fatalf("url %s; banner:\n%s", rn.url, rn.out)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	req, _ := http.NewRequest("GET", rn.url+"/vault", nil)
	req.SetBasicAuth(rn.user, rn.pass)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /vault over TLS: %d", resp.StatusCode)
	}
	// Plain HTTP on the TLS port is refused.
	plain := strings.Replace(rn.url, "https://", "http://", 1)
	if resp, err := http.Get(plain + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Fatal("plain HTTP served on the TLS port")
		}
	}

	// A missing certificate stops the start with a clear error.
	os.WriteFile(cfg, []byte("[tls]\ncert_file = \"nope.pem\"\nkey_file = \"key.pem\"\n"), 0o600)
	out := &syncBuffer{}
	if code := run(t.Context(), []string{"--config", cfg, "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data2")}, envOf(nil), out, nil); code != exitFailure || !strings.Contains(out.String(), "tls:") {
		t.Fatalf("exit %d: %s", code, out)
	}
}

// Databases created and deleted over HTTP are served through the
// hold-back too; the relay's own paths cannot be databases.
func TestDatabasesCreatedAndDeletedOverHTTP(t *testing.T) {
	rn := startAdmin(t, t.TempDir())
	rn.admin("PUT", "/notes", nil, 201)
	meta, chunks := note(t, plainCodec(t), "A.md", "a\n")
	rn.pushDocs("notes", meta)
	if got := heldIDs(rn.status().db(t, "notes")); len(got) != 1 {
		t.Fatalf("held in a database created over HTTP: %v", got)
	}
	var dbs []string
	if err := json.Unmarshal(rn.admin("GET", "/_all_dbs", nil, 200), &dbs); err != nil || !slices.Equal(dbs, []string{"notes", "vault"}) {
		t.Fatalf("_all_dbs %v %v", dbs, err)
	}
	rn.admin("DELETE", "/notes", nil, 200)
	rn.admin("GET", "/notes", nil, 404)
	for _, d := range rn.status().Databases {
		if d.Name == "notes" {
			t.Fatal("a deleted database is in /status")
		}
	}
	// Created again, it is empty: nothing held survives the deletion.
	rn.admin("PUT", "/notes", nil, 201)
	if got := heldIDs(rn.status().db(t, "notes")); len(got) != 0 {
		t.Fatalf("held after re-creation: %v", got)
	}
	rn.pushDocs("notes", append(chunks, meta)...)
	if !slices.Contains(rn.changedIDs("notes"), livesync.Doc(meta).ID()) {
		t.Fatal("a complete note is not served")
	}
	for _, name := range []string{"status", "metrics", "healthz"} {
		if code, _ := rn.do("PUT", "/"+name, rn.user, rn.pass, nil); code != http.StatusMethodNotAllowed {
			t.Errorf("PUT /%s: %d", name, code)
		}
	}
}
