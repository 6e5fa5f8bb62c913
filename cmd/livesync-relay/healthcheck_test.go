package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ebridge "github.com/livesync-go/livesync-go/engine/bridge"
)

// hc runs `livesync-relay healthcheck ARGS` as main does and returns its
// exit code and its output, which must be one line.
func hc(t *testing.T, env map[string]string, args ...string) (int, string) {
	t.Helper()
	out := &syncBuffer{}
	code := run(t.Context(), append([]string{"healthcheck"}, args...), envOf(env), out, nil)
	s := out.String()
	if strings.Count(s, "\n") != 1 || !strings.HasSuffix(s, "\n") {
		t.Fatalf("healthcheck %v printed not one line: %q", args, s)
	}
	return code, strings.TrimSpace(s)
}

// wantHC runs the healthcheck and wants the exit code and a line
// containing every one of subs.
func wantHC(t *testing.T, env map[string]string, code int, subs []string, args ...string) {
	t.Helper()
	got, line := hc(t, env, args...)
	if got != code {
		t.Errorf("healthcheck %v: exit %d (%s), want %d", args, got, line, code)
		return
	}
	for _, s := range subs {
		if !strings.Contains(line, s) {
			t.Errorf("healthcheck %v: %q does not say %q", args, line, s)
		}
	}
}

// freeLoopbackPort returns a loopback port nobody listens on now.
func freeLoopbackPort(t *testing.T) string {
	t.Helper()
	_, port, _ := net.SplitHostPort(freePort(t))
	return port
}

// TestHealthcheckRelay checks a real relay found the ways the relay
// finds its own address (the configuration named by the environment or
// --config, --listen over it, a wildcard host reached on loopback), and
// its answer once it has stopped.
func TestHealthcheckRelay(t *testing.T) {
	dir := t.TempDir()
	port := freeLoopbackPort(t)
	cfg := filepath.Join(dir, "relay.toml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("listen = \"127.0.0.1:%s\"\ndata_dir = \"data\"\n", port)), 0o600)
	env := map[string]string{envAdminPassword: testAdminPW, envConfig: cfg}
	rn := start(t, []string{"--listen", "127.0.0.1:" + port}, env)
	hz := "http://127.0.0.1:" + port + "/healthz"
	healthy := []string{"healthy: " + hz + " ok in "}

	wantHC(t, env, 0, healthy)
	wantHC(t, nil, 0, healthy, "--config", cfg)
	wantHC(t, nil, 0, healthy, "--listen", "0.0.0.0:"+port)
	wantHC(t, nil, 0, healthy, "--listen", ":"+port)
	wantHC(t, nil, 0, healthy, "--url", rn.url)
	wantHC(t, nil, 0, healthy, "--url", rn.url+"/healthz")
	wantHC(t, env, 0, append(healthy, "1 database(s), 0 of 0 upstream(s) live, 0 held document(s)"), "--deep")

	// --deep needs the admin: none, or a wrong password, is unhealthy.
	wantHC(t, map[string]string{envConfig: cfg}, 1, []string{"unhealthy: --deep reads /status, which needs an admin"}, "--deep")
	wantHC(t, map[string]string{envConfig: cfg, envAdminPassword: "wrong-password"}, 1, []string{"/status: 401", "credentials"}, "--deep")
	pwFile := filepath.Join(dir, "admin.password")
	os.WriteFile(pwFile, []byte(testAdminPW+"\n"), 0o600)
	wantHC(t, map[string]string{envConfig: cfg, envAdminPasswordFile: pwFile}, 0, healthy, "--deep")

	wantHC(t, env, 1, []string{"unhealthy: ", "flag provided but not defined"}, "--bogus")
	if code := rn.stop(); code != exitOK {
		t.Fatalf("relay exit %d", code)
	}
	wantHC(t, env, 1, []string{"unhealthy: ", hz, "connection refused"})
}

// TestHealthcheckAnswers: what is not a healthy relay's answer is
// unhealthy, with the reason on the line.
func TestHealthcheckAnswers(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/stopping/healthz":
			writeJSONStatus(w, http.StatusServiceUnavailable, map[string]string{"status": "shutting down"})
		case "/slow/healthz":
			<-r.Context().Done() // until the check gives up
		case "/couch/healthz":
			writeJSONStatus(w, http.StatusNotFound, map[string]string{"error": "not_found", "reason": "Database does not exist."})
		default:
			writeJSONStatus(w, http.StatusOK, map[string]string{"status": "ok"})
		}
	}))
	defer srv.Close()
	wantHC(t, nil, 0, []string{"healthy: " + srv.URL + "/healthz ok"}, "--url", srv.URL)
	wantHC(t, nil, 1, []string{"unhealthy: " + srv.URL + "/stopping/healthz: 503 shutting down"}, "--url", srv.URL+"/stopping")
	wantHC(t, nil, 1, []string{"404", "not_found", "is this a livesync-relay?"}, "--url", srv.URL+"/couch")
	start := time.Now()
	wantHC(t, nil, 1, []string{"no answer within the timeout"}, "--url", srv.URL+"/slow", "--timeout", "200ms")
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("a 200ms timeout took %s", d)
	}
	wantHC(t, nil, 1, []string{"--url \"ftp://x\": want http(s)://host:port"}, "--url", "ftp://x")
}

// certFor writes a self-signed certificate for dnsName only (no IP
// address, so not for the loopback address the check dials) and its key.
func certFor(t *testing.T, dir, dnsName string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: dnsName}, DNSNames: []string{dnsName},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile = filepath.Join(dir, dnsName+".pem"), filepath.Join(dir, dnsName+".key")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	return certFile, keyFile
}

// TestHealthcheckTLS: a relay serving a self-signed certificate for its
// public name is healthy when checked through its configuration (the
// certificate is trusted, its name not asked of a loopback address); an
// explicit --url checks the certificate as any client does, unless
// --insecure.
func TestHealthcheckTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, _ := certFor(t, dir, "relay.example.com")
	other, _ := certFor(t, dir, "other.example.com")
	port := freeLoopbackPort(t)
	cfg := filepath.Join(dir, "relay.toml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("listen = \"127.0.0.1:%s\"\ndata_dir = \"data\"\n\n[tls]\ncert_file = \"relay.example.com.pem\"\nkey_file = \"relay.example.com.key\"\n", port)), 0o600)
	env := map[string]string{envAdminPassword: testAdminPW, envConfig: cfg}
	rn := start(t, []string{"--listen", "127.0.0.1:" + port}, env)
	base := "https://127.0.0.1:" + port
	if rn.url != base {
		t.Fatalf("relay url %s, want %s", rn.url, base)
	}
	wantHC(t, env, 0, []string{"healthy: " + base + "/healthz ok"})
	wantHC(t, env, 0, []string{"healthy: ", "1 database(s)"}, "--deep")
	wantHC(t, nil, 1, []string{"unhealthy: ", "certificate", "--insecure"}, "--url", base)
	wantHC(t, nil, 1, []string{"unhealthy: ", "127.0.0.1", "--url with a name the certificate carries"}, "--url", base, "--ca", certFile)
	wantHC(t, nil, 0, []string{"healthy: "}, "--url", base, "--insecure")
	wantHC(t, nil, 0, []string{"healthy: "}, "--url", base, "--insecure", "--ca", "/nonexistent")
	// A configuration naming another certificate than the relay serves
	// does not make the relay's trusted.
	cfg2 := filepath.Join(dir, "other.toml")
	os.WriteFile(cfg2, []byte(fmt.Sprintf("listen = \"127.0.0.1:%s\"\n\n[tls]\ncert_file = %q\nkey_file = \"x.key\"\n", port, other)), 0o600)
	wantHC(t, nil, 1, []string{"unhealthy: ", "certificate signed by unknown authority", "--ca FILE"}, "--config", cfg2)
	wantHC(t, nil, 0, []string{"healthy: "}, "--config", cfg2, "--ca", certFile)
	// Plain HTTP on the TLS port is not a healthy answer.
	wantHC(t, nil, 1, []string{"unhealthy: "}, "--url", "http://127.0.0.1:"+port)
}

// TestHealthcheckSelfSigned: the certificate a self_signed relay made
// for itself in its data folder is the one the check trusts, found
// through data_dir or --data-dir.
func TestHealthcheckSelfSigned(t *testing.T) {
	dir := t.TempDir()
	port := freeLoopbackPort(t)
	cfg := filepath.Join(dir, "relay.toml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("listen = \"127.0.0.1:%s\"\n\n[tls]\nself_signed = true\n", port)), 0o600)
	data := filepath.Join(dir, "data")
	env := map[string]string{envAdminPassword: testAdminPW, envConfig: cfg}
	start(t, []string{"--data-dir", data, "--listen", "127.0.0.1:" + port}, env)
	wantHC(t, env, 0, []string{"healthy: https://127.0.0.1:" + port + "/healthz ok"}, "--data-dir", data)
	// Another data folder has no certificate: the check says which.
	wantHC(t, env, 1, []string{"unhealthy: reading the certificate to trust", selfSignedCertFile})

	// --tls-self-signed instead of the configuration's [tls].
	port2 := freeLoopbackPort(t)
	env2 := map[string]string{envAdminPassword: testAdminPW}
	data = filepath.Join(dir, "data2")
	start(t, []string{"--data-dir", data, "--listen", "127.0.0.1:" + port2, "--tls-self-signed"}, env2)
	wantHC(t, env2, 0, []string{"healthy: https://127.0.0.1:" + port2 + "/healthz ok"}, "--data-dir", data, "--listen", "127.0.0.1:"+port2, "--tls-self-signed")
	wantHC(t, env2, 1, []string{"unhealthy: "}, "--data-dir", data, "--listen", "127.0.0.1:"+port2)
}

// TestHealthcheckDeep: --deep reports an upstream that stopped
// answering (after --max-stale) and a database at its held-document
// limit, with the admin of [[users]] found in the configuration.
func TestHealthcheckDeep(t *testing.T) {
	b := startConfigured(t, t.TempDir(), "", nil)
	dir := t.TempDir()
	a := startConfigured(t, dir, "[holdback]\nmax_held_documents = 1\n\n[[databases]]\nname = \"vault\"\n\n"+couchUpstream("b", b.url, "sync", ""),
		map[string]string{"TEST_UPSTREAM_PW": testAdminPW})
	env := map[string]string{"TEST_ADMIN_PW": testAdminPW}
	url := []string{"--url", a.url, "--deep"}
	a.waitUpstream("vault", "b", isLive)
	wantHC(t, env, 0, []string{"healthy: ", "1 of 1 upstream(s) live, 0 held document(s)"}, append(url, "--config", filepath.Join(dir, "relay.toml"))...)

	b.stop()
	a.waitUpstream("vault", "b", func(u ebridge.UpstreamStatus) bool { return u.State == ebridge.StateBackoff })
	wantHC(t, env, 0, []string{"healthy: ", "0 of 1 upstream(s) live"}, append(url, "--config", filepath.Join(dir, "relay.toml"))...)
	wantHC(t, env, 1, []string{"unhealthy: database vault: upstream b backoff for ", "since its last success", "connection refused"},
		append(url, "--config", filepath.Join(dir, "relay.toml"), "--max-stale", "1ms")...)
	// Without --deep the relay is healthy: it serves.
	wantHC(t, env, 0, []string{"healthy: "}, "--url", a.url)

	meta, _ := note(t, plainCodec(t), "A.md", "a\n")
	a.pushDocs("vault", meta)
	wantHC(t, env, 1, []string{"database vault: 1 held documents, at max_held_documents"}, append(url, "--config", filepath.Join(dir, "relay.toml"))...)
}

// TestHealthcheckACMEAsksForItsName: a relay with ACME certificates picks
// one by the name the client asks for, so the check of its own address
// asks for the first of acme_domains.
func TestHealthcheckACMEAsksForItsName(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "relay.toml")
	os.WriteFile(cfg, []byte("listen = \":443\"\n\n[tls]\nacme_domains = [\"notes.example.org\", \"b.example.org\"]\n"), 0o600)
	ht, err := resolveHealthTarget(healthOptions{config: cfg}, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := ht.base.String(); got != "https://127.0.0.1:443" || ht.tls.ServerName != "notes.example.org" {
		t.Fatalf("url %s, server name %q", got, ht.tls.ServerName)
	}
	if ht, err = resolveHealthTarget(healthOptions{config: cfg, url: "https://b.example.org"}, envOf(nil)); err != nil || ht.tls.ServerName != "" {
		t.Fatalf("with --url: server name %q (%v), want the URL's", ht.tls.ServerName, err)
	}
}
