package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestTLSConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		name, text, want string // want "" means valid
	}{
		{"cert files", "cert_file = \"c.pem\"\nkey_file = \"k.pem\"", ""},
		{"acme", "acme_domains = [\"notes.example.org\", \"Sync.Example.org\"]\nacme_email = \"me@example.org\"\nacme_http_listen = \":80\"", ""},
		{"acme private CA", "acme_domains = [\"notes.example.org\"]\nacme_directory = \"https://ca.internal:14000/dir\"\nacme_ca_file = \"ca.pem\"", ""},
		{"self-signed", "self_signed = true\nself_signed_names = [\"nas.lan\", \"192.168.1.20\"]", ""},
		{"half a pair", "cert_file = \"c.pem\"", "give both cert_file and key_file"},
		{"files and acme", "cert_file = \"c.pem\"\nkey_file = \"k.pem\"\nacme_domains = [\"a.example.org\"]", "cert_file/key_file and acme_domains are different ways"},
		{"acme and self-signed", "acme_domains = [\"a.example.org\"]\nself_signed = true", "acme_domains and self_signed"},
		{"acme keys alone", "acme_email = \"me@example.org\"\nacme_ca_file = \"x.pem\"", "acme_ca_file, acme_email without acme_domains"},
		{"wildcard", "acme_domains = [\"*.example.org\"]", "DNS-01"},
		{"ip", "acme_domains = [\"203.0.113.7\"]", "is an IP address"},
		{"url", "acme_domains = [\"https://notes.example.org\"]", "without scheme"},
		{"port", "acme_domains = [\"notes.example.org:443\"]", "without a port"},
		{"single label", "acme_domains = [\"notes\"]", "not a public host name"},
		{"twice", "acme_domains = [\"a.example.org\", \"A.example.org\"]", "listed twice"},
		{"email", "acme_domains = [\"a.example.org\"]\nacme_email = \"nobody\"", "acme_email"},
		{"directory http", "acme_domains = [\"a.example.org\"]\nacme_directory = \"http://ca:4000/dir\"", "want the https:// URL"},
		{"http listen", "acme_domains = [\"a.example.org\"]\nacme_http_listen = \"80\"", "acme_http_listen"},
		{"names alone", "self_signed_names = [\"nas.lan\"]", "self_signed_names without self_signed"},
		{"bad name", "self_signed = true\nself_signed_names = [\"nas lan\"]", "neither a host name nor an IP"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseConfig("[tls]\n"+tc.text+"\n", "t.toml")
			if err != nil {
				t.Fatal(err)
			}
			err = c.validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one with %q", err, tc.want)
			}
		})
	}
}

func TestTLSResolve(t *testing.T) {
	c, err := parseConfig("[tls]\nacme_domains = [\"Notes.Example.org\"]\nacme_ca_file = \"ca.pem\"\nacme_email = \"mailto:me@example.org\"\n", "/etc/relay/relay.toml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := resolve(c, flagValues{}, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := resolve(c, flagValues{tlsSelfSigned: true}, envOf(nil)); !errors.As(err, new(usageError)) || !strings.Contains(err.Error(), "--tls-self-signed") {
		t.Errorf("--tls-self-signed with acme_domains: %v", err)
	}
	room, err := parseConfig("[[databases]]\nname = \"v\"\n[[databases.livesync_p2p]]\ngroup = \"g\"\nroom_passphrase_env = \"P\"\nauto_accept = \"laptop\"\n", "r.toml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := resolve(room, flagValues{tlsSelfSigned: true}, envOf(map[string]string{"P": "x"})); err == nil || !strings.Contains(err.Error(), "own /_nostr") {
		t.Errorf("--tls-self-signed with a room on the relay's own /_nostr: %v", err)
	}
	a := s.tls.acme
	if a == nil || a.domains[0] != "notes.example.org" || a.directory != "https://acme-v02.api.letsencrypt.org/directory" ||
		a.caFile != "/etc/relay/ca.pem" || a.email != "me@example.org" || !s.tlsOn() {
		t.Fatalf("acme settings %+v", a)
	}
	if got := acmeCacheFor("/d/acme", a.directory); got != "/d/acme/acme-v02.api.letsencrypt.org" {
		t.Errorf("cache %s", got)
	}
	if got := acmeCacheFor("/d/acme", "https://127.0.0.1:14000/dir"); got != "/d/acme/127.0.0.1_14000" {
		t.Errorf("cache %s", got)
	}
	plain, _ := parseConfig("", "")
	if s, err := resolve(plain, flagValues{}, envOf(nil)); err != nil || s.tlsOn() {
		t.Fatalf("plain HTTP is not the default: %v", err)
	}
	// Every database on CouchDB: no data folder to keep a certificate in.
	c, err = parseConfig("[tls]\nself_signed = true\n[[databases]]\nname = \"v\"\n[databases.store]\nkind = \"couchdb\"\nurl = \"http://couch:5984\"\nuser = \"a\"\npassword_env = \"P\"\n", "r.toml")
	if err != nil {
		t.Fatal(err)
	}
	var ue usageError
	if _, err := resolve(c, flagValues{}, envOf(map[string]string{"P": "x"})); !errors.As(err, &ue) || !strings.Contains(err.Error(), "no data folder") {
		t.Fatalf("resolve: %v", err)
	}
}

var fingerprintLine = regexp.MustCompile(`(?m)^\s+((?:[0-9A-F]{2}:){31}[0-9A-F]{2})$`)

// A self-signed certificate is made at first start, shown by its
// fingerprint, kept and served again at the next start (here with
// --tls-self-signed instead of the key); a client that pins the
// fingerprint connects.
func TestTLSSelfSigned(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "relay.toml")
	os.WriteFile(cfg, []byte("[tls]\nself_signed = true\nself_signed_names = [\"relay.lan\"]\n"), 0o600)
	data := filepath.Join(dir, "data")

	served := func(rn *running) string {
		t.Helper()
		m := fingerprintLine.FindStringSubmatch(rn.out.String())
		if m == nil {
			t.Fatalf("no fingerprint in the banner:\n%s", rn.out)
		}
		if strings.Contains(rn.out.String(), "PRIVATE KEY") {
			t.Fatal("the output shows the private key")
		}
		// Pinning: no CA, only the fingerprint.
		var seen string
		client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
			InsecureSkipVerify: true,
			VerifyConnection: func(cs tls.ConnectionState) error {
				seen = fingerprint(cs.PeerCertificates[0].Raw)
				if seen != m[1] {
					return errors.New("fingerprint mismatch")
				}
				return nil
			},
		}}}
		req, _ := http.NewRequest("GET", rn.url+"/", nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("pinned GET /: %v (served %s, banner %s)", err, seen, m[1])
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), `"couchdb"`) {
			t.Fatalf("GET /: %d %s", resp.StatusCode, b)
		}
		return m[1]
	}

	rn := startAdmin(t, data, "--config", cfg)
	if !strings.HasPrefix(rn.url, "https://127.0.0.1:") || !strings.Contains(rn.out.String(), "self-signed certificate, made now") {
		t.Fatalf("url %s; output:\n%s", rn.url, rn.out)
	}
	fp := served(rn)
	if !strings.Contains(rn.out.String(), "sha256="+fp) {
		t.Errorf("the log does not show the fingerprint:\n%s", rn.out)
	}
	certPath := filepath.Join(data, tlsSelfSignedDir, selfSignedCertFile)
	fi, err := os.Stat(filepath.Join(data, tlsSelfSignedDir, selfSignedKeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	// The kept file is a trust anchor for the names it covers.
	pemBytes, _ := os.ReadFile(certPath)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemBytes)
	for _, name := range []string{"127.0.0.1", "localhost", "relay.lan"} {
		conn, err := tls.Dial("tcp", rn.r.ln.Addr().String(), &tls.Config{RootCAs: pool, ServerName: name})
		if err != nil {
			t.Fatalf("trusting the file, as %s: %v", name, err)
		}
		conn.Close()
	}
	rn.stop()

	// The flag is the same as the key; the kept certificate covers what
	// it needs, so it is served again.
	rn = startAdmin(t, data, "--tls-self-signed")
	if got := served(rn); got != fp || strings.Contains(rn.out.String(), "made now") {
		t.Fatalf("second start serves %s, first %s; output:\n%s", got, fp, rn.out)
	}
}

// A kept certificate near its end, or one that misses a configured
// name, is replaced; otherwise the same one is served.
func TestTLSSelfSignedRenewal(t *testing.T) {
	dir := t.TempDir()
	all, req := selfSignedNames("127.0.0.1", nil)
	now := time.Now()
	c1, err := loadOrCreateSelfSigned(dir, all, req, now)
	if err != nil || !c1.created || c1.why != "none yet" {
		t.Fatalf("%+v %v", c1, err)
	}
	if k := c1.leaf.PublicKeyAlgorithm; k != x509.ECDSA || c1.leaf.IsCA || c1.leaf.NotAfter.Sub(now) < 800*24*time.Hour {
		t.Fatalf("certificate %v CA=%v until %v", k, c1.leaf.IsCA, c1.leaf.NotAfter)
	}
	c2, err := loadOrCreateSelfSigned(dir, all, req, now.Add(24*time.Hour))
	if err != nil || c2.created || fingerprint(c2.leaf.Raw) != fingerprint(c1.leaf.Raw) {
		t.Fatalf("kept one not reused: %+v %v", c2, err)
	}
	c3, err := loadOrCreateSelfSigned(dir, all, req, now.Add(selfSignedValidity))
	if err != nil || !c3.created || !strings.Contains(c3.why, "expires") {
		t.Fatalf("expiring one not replaced: %+v %v", c3, err)
	}
	all, req = selfSignedNames("127.0.0.1", []string{"nas.lan"})
	c4, err := loadOrCreateSelfSigned(dir, all, req, now.Add(selfSignedValidity))
	if err != nil || !c4.created || !strings.Contains(c4.why, "nas.lan") {
		t.Fatalf("a new name did not make a new one: %+v %v", c4, err)
	}
	os.WriteFile(filepath.Join(dir, selfSignedCertFile), []byte("garbage"), 0o644)
	c5, err := loadOrCreateSelfSigned(dir, all, req, now)
	if err != nil || !c5.created || !strings.Contains(c5.why, "cannot be read") {
		t.Fatalf("a damaged one was not replaced: %+v %v", c5, err)
	}
}
