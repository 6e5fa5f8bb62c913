package main

import (
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// "Write cmd/livesync-relay/relay.example.toml, documented, and test that
// it parses and validates."
func TestExampleConfigParsesAndValidates(t *testing.T) {
	c, err := loadConfig("relay.example.toml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "0.0.0.0:6984" || c.DataDir != "/var/lib/livesync-relay" || c.TLS.CertFile == "" || c.TLS.KeyFile == "" ||
		c.MaxRequestBytes != 64<<20 || c.MaxDocumentBytes != 50_000_000 || c.MetricsPublic || c.ShutdownTimeout != 30*time.Second ||
		c.Log.Format != "json" || c.Log.Level != "info" {
		t.Fatalf("top level: %+v", c)
	}
	if !c.corsSet || !slices.Equal(c.CORSOrigins, defaultCORSOrigins) {
		t.Errorf("cors_origins %v", c.CORSOrigins)
	}
	if len(c.Users) != 3 || !c.Users[0].Admin || c.Users[1].PasswordEnv == "" || c.Users[2].PasswordHash == "" ||
		!slices.Equal(c.Users[1].Databases, []string{"alice-notes"}) {
		t.Errorf("users %+v", c.Users)
	}
	if !c.dbsDefined || len(c.Databases) != 3 || c.Databases[0].PassphraseFile == "" {
		t.Errorf("databases %+v", c.Databases)
	}
	if st := c.Databases[2].Store; st.kind() != storeCouch || st.URL != "http://couchdb:5984" || st.Database != "team-notes" ||
		st.User != "admin" || st.PasswordEnv == "" || st.LeaseTTL != 15*time.Second || st.Refresh != 2*time.Second {
		t.Errorf("team-notes store %+v", st)
	}
	if c.Databases[0].Store.kind() != storeBolt {
		t.Errorf("alice-notes store %+v, want bbolt", c.Databases[0].Store)
	}
	if ups := c.Databases[0].Upstreams; len(ups) != 2 || ups[0].Kind != kindCouchDB || ups[0].mode() != modeSync ||
		ups[1].Kind != kindS3 || !ups[1].DirectFetch || ups[1].PollInterval != 30*time.Second || !pathStyle(ups[1]) {
		t.Errorf("alice-notes upstreams %+v", ups)
	}
	if ups := c.Databases[1].Upstreams; len(ups) != 1 || ups[0].mode() != modePull || !ups[0].ChunksOnline {
		t.Errorf("bob-notes upstreams %+v", ups)
	}
	if h := c.Hunt; h.MaxInFlight != 5 || h.MaxPerWindow != 30 || h.Window != time.Minute || h.BackoffBase != 20*time.Second ||
		h.BackoffCap != 2*time.Minute || h.HedgeAfter != 30*time.Second || h.BatchSize != 100 {
		t.Errorf("hunt %+v", h)
	}
	if c.Compaction.KeepRevisionBodies != 20 {
		t.Errorf("compaction %+v", c.Compaction)
	}
	p := c.Purgatory
	if p.PushedDelay != 3*time.Minute || p.PulledDelay != 500*time.Millisecond || p.ActiveFor != 30*time.Minute ||
		p.SoftExpiry != 24*time.Hour || p.RememberExpired != 7*24*time.Hour || p.ReleaseRetry != 30*time.Second || p.SaveInterval != 30*time.Second {
		t.Errorf("purgatory %+v", p)
	}
}

func TestConfigResolvesSecretsAndPaths(t *testing.T) {
	c, err := loadConfig(filepath.Join("testdata", "relay.toml"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := resolve(c, flagValues{}, envOf(map[string]string{"TEST_CAROL_PASSWORD": "carol-secret"}))
	if err != nil {
		t.Fatal(err)
	}
	if s.dataDir != filepath.Join("testdata", "data") || s.listen != "127.0.0.1:0" || s.cors == nil || len(s.cors) != 0 ||
		s.maxRequestBytes != 1<<20 || s.maxDocumentBytes != 500000 || !s.metricsPublic || s.shutdownTimeout != 5*time.Second ||
		s.logFormat != "json" || s.logLevel != slog.LevelDebug {
		t.Fatalf("settings %+v", s)
	}
	if !slices.Equal(s.databases, []string{"notes", "shared"}) || s.passphrases["notes"] != "vault-secret-passphrase" || len(s.passphrases) != 1 {
		t.Errorf("databases %v, %d passphrases (the CRLF must be trimmed)", s.databases, len(s.passphrases))
	}
	if len(s.users) != 2 || !s.configAdmins {
		t.Fatalf("users %+v", s.users)
	}
	for _, u := range s.users {
		if !strings.HasPrefix(u.Password, "-pbkdf2:sha256-") || strings.Contains(u.Password, "secret") {
			t.Errorf("user %s: the password is not hashed", u.Name)
		}
	}
	if s.holdback.Purgatory.PushedDelay != 10*time.Second || s.holdback.Purgatory.ActiveFor != time.Hour || s.holdback.SaveInterval != time.Second {
		t.Errorf("holdback %+v", s.holdback)
	}

	// Flags win over the file.
	s, err = resolve(c, flagValues{listen: "127.0.0.1:7000", dataDir: "elsewhere", logFormat: "text", logLevel: "warn"},
		envOf(map[string]string{"TEST_CAROL_PASSWORD": "x"}))
	if err != nil {
		t.Fatal(err)
	}
	if s.listen != "127.0.0.1:7000" || s.dataDir != "elsewhere" || s.logFormat != "text" || s.logLevel != slog.LevelWarn {
		t.Errorf("flags did not override: %+v", s)
	}

	// A secret that cannot be read is a usage error that names its
	// source, not its value.
	_, err = resolve(c, flagValues{}, envOf(nil))
	if err == nil || !strings.Contains(err.Error(), "TEST_CAROL_PASSWORD") {
		t.Errorf("missing environment password: %v", err)
	}
	if _, ok := err.(usageError); !ok {
		t.Errorf("%T is not a usage error", err)
	}
}

func TestNoConfigMeansDefaults(t *testing.T) {
	s, err := resolve(&fileConfig{}, flagValues{}, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if s.listen != "127.0.0.1:5984" || s.dataDir != "livesync-data" || !slices.Equal(s.cors, defaultCORSOrigins) ||
		!slices.Equal(s.databases, []string{"vault"}) || s.configAdmins || len(s.users) != 0 || s.metricsPublic ||
		s.shutdownTimeout != 30*time.Second || s.logFormat != "text" || s.logLevel != slog.LevelInfo {
		t.Fatalf("defaults: %+v", s)
	}
}

func TestConfigErrors(t *testing.T) {
	up := func(body string) string { return "[[databases]]\nname = \"v\"\n[[databases.upstreams]]\n" + body }
	couch := "name = \"c\"\nkind = \"couchdb\"\nurl = \"http://h:1\"\ndatabase = \"v\""
	s3 := "name = \"s\"\nkind = \"s3\"\nendpoint = \"h:9000\"\nbucket = \"bkt\""
	for _, tc := range []struct{ name, text, want string }{
		{"unknown key", `lisen = "x"`, "unknown key(s) lisen"},
		{"unknown nested key", "[tls]\ncert = \"a\"", "tls.cert"},
		{"not TOML", `listen = `, "configuration"},
		{"wrong type", `max_request_bytes = "big"`, "max_request_bytes"},
		{"listen", `listen = "5984"`, "want host:port"},
		{"half TLS", "[tls]\ncert_file = \"a.pem\"", "both cert_file and key_file"},
		{"log format", "[log]\nformat = \"xml\"", "log.format"},
		{"log level", "[log]\nlevel = \"loud\"", "log.level"},
		{"negative timeout", `shutdown_timeout = "-1s"`, "shutdown_timeout is negative"},
		{"bad duration", `shutdown_timeout = "soon"`, "soon"},
		{"negative size", `max_request_bytes = -1`, "MaxRequestBytes is negative"},
		{"CORS origin", `cors_origins = ["obsidian.md"]`, "CORS origin"},
		{"database name", "[[databases]]\nname = \"Vault\"", "not a valid database name"},
		{"reserved name", "[[databases]]\nname = \"status\"", "reserved"},
		{"database twice", "[[databases]]\nname = \"a\"\n[[databases]]\nname = \"a\"", "listed twice"},
		{"two passphrase sources", "[[databases]]\nname = \"a\"\npassphrase_file = \"f\"\npassphrase_env = \"E\"", "not both"},
		{"no password", "[[users]]\nname = \"a\"", "exactly one of"},
		{"two passwords", "[[users]]\nname = \"a\"\npassword_file = \"f\"\npassword_env = \"E\"", "exactly one of"},
		{"plain hash", "[[users]]\nname = \"a\"\npassword_hash = \"secret\"", "password_hash must be"},
		{"malformed hash", "[[users]]\nname = \"a\"\npassword_hash = \"-pbkdf2:sha256-zz,s,1\"", "not hex"},
		{"user name", "[[users]]\nname = \"a:b\"\npassword_env = \"E\"", "name must be non-empty"},
		{"user twice", "[[users]]\nname = \"a\"\npassword_env = \"E\"\n[[users]]\nname = \"a\"\npassword_env = \"E\"", "listed twice"},
		{"user database", "[[users]]\nname = \"a\"\npassword_env = \"E\"\ndatabases = [\"A\"]", "not a valid database name"},
		{"purgatory", "[purgatory]\nactive_for = \"-1m\"", "ActiveFor"},
		{"save interval", "[purgatory]\nsave_interval = \"-1s\"", "SaveInterval"},
		{"hunt", "[hunt]\nbatch_size = 101", "hunt:"},
		{"compaction", "[compaction]\nkeep_revision_bodies = -1", "keep_revision_bodies is negative"},
		{"compaction key", "[compaction]\nkeep_bodies = 3", "compaction.keep_bodies"},
		{"upstream name", up("name = \"a b\"\nkind = \"couchdb\"\nurl = \"http://h:1\"\ndatabase = \"v\""), "name \"a b\""},
		{"upstream twice", up(couch) + "\n[[databases.upstreams]]\n" + couch, "upstream \"c\" is listed twice"},
		{"upstream kind", up("name = \"x\"\nkind = \"nostr\""), "kind \"nostr\""},
		{"upstream mode", up(couch + "\nmode = \"both\""), "mode \"both\""},
		{"couch url", up("name = \"x\"\nkind = \"couchdb\"\nurl = \"couch.example.com\"\ndatabase = \"v\""), "http:// or https://"},
		{"couch url user", up("name = \"x\"\nkind = \"couchdb\"\nurl = \"http://u:p@h:1\"\ndatabase = \"v\""), "no user or password in the URL"},
		{"couch url path", up("name = \"x\"\nkind = \"couchdb\"\nurl = \"http://h:1/v\"\ndatabase = \"v\""), "the database goes in database"},
		{"couch database", up("name = \"x\"\nkind = \"couchdb\"\nurl = \"http://h:1\"\ndatabase = \"V\""), "not a valid database name"},
		{"couch two passwords", up(couch + "\nuser = \"u\"\npassword_file = \"f\"\npassword_env = \"E\""), "not both"},
		{"couch password without user", up(couch + "\npassword_env = \"E\""), "a password needs a user"},
		{"couch chunks online push", up(couch + "\nmode = \"push\"\nchunks_online = true"), "chunks_online applies to pulls"},
		{"couch s3 key", up(couch + "\ndirect_fetch = true"), "direct_fetch is a key of s3 upstreams"},
		{"s3 endpoint", up("name = \"x\"\nkind = \"s3\"\ne2ee = false"), "needs endpoint and bucket"},
		{"s3 passphrase", up(s3), "needs the vault passphrase"},
		{"s3 secret", up(s3 + "\ne2ee = false\naccess_key = \"k\""), "give access_key with secret_key_file or secret_key_env"},
		{"s3 two secrets", up(s3 + "\ne2ee = false\naccess_key = \"k\"\nsecret_key_file = \"f\"\nsecret_key_env = \"E\""), "not both"},
		{"s3 source", up(s3 + "\ne2ee = false\nmode = \"source\""), "needs direct_fetch = true"},
		{"s3 chunks online", up(s3 + "\ne2ee = false\nchunks_online = true"), "journal packs carry their chunks"},
		{"s3 couch key", up(s3 + "\ne2ee = false\ndatabase = \"v\""), "database is a key of couchdb upstreams"},
		{"s3 poll", up(s3 + "\ne2ee = false\npoll_interval = \"-1s\""), "poll_interval is negative"},
		{"s3 endpoint form", up("name = \"x\"\nkind = \"s3\"\ne2ee = false\nendpoint = \"ftp://h\"\nbucket = \"b\""), "upstream \"x\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseConfig(tc.text, "test.toml")
			if err == nil {
				err = c.validate()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestReadSecretFile(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ content, want string }{
		{"s3cret\n", "s3cret"}, {"s3cret\r\n", "s3cret"}, {"s3cret", "s3cret"}, {"two\nlines\n", "two\nlines"}, {" spaced \n", " spaced "},
	} {
		f := filepath.Join(dir, "secret")
		os.WriteFile(f, []byte(tc.content), 0o600)
		got, err := readSecretFile(f, "password")
		if err != nil || got != tc.want {
			t.Errorf("%q: %q, %v", tc.content, got, err)
		}
	}
	os.WriteFile(filepath.Join(dir, "empty"), []byte("\n"), 0o600)
	if _, err := readSecretFile(filepath.Join(dir, "empty"), "password"); err == nil {
		t.Error("an empty secret file was accepted")
	}
}

// FuzzParseConfig: no configuration text makes parsing or validation
// panic.
func FuzzParseConfig(f *testing.F) {
	for _, name := range []string{"relay.example.toml", filepath.Join("testdata", "relay.toml")} {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Add("[[users]]\nname = \"a\"\npassword_hash = \"-pbkdf2:sha256-00,s,1\"\n")
	f.Fuzz(func(t *testing.T, text string) {
		c, err := parseConfig(text, "fuzz.toml")
		if err != nil {
			return
		}
		_ = c.validate()
	})
}

// TestDefaultsPassTheLiveSyncSetupCheck: with no configuration, the values
// LiveSync's setup check reads from a CouchDB (engine/FORMAT.md §5.1) are the
// ones it asks for, and a 401 carries the WWW-Authenticate header it
// expects.
func TestDefaultsPassTheLiveSyncSetupCheck(t *testing.T) {
	rn := startAdmin(t, t.TempDir())
	for path, want := range map[string]string{
		"/_node/_local/_config/chttpd/max_http_request_size": `"4294967296"`,
		"/_node/_local/_config/httpd/WWW-Authenticate":       `"Basic realm=\"couchdb\""`,
	} {
		if got := strings.TrimSpace(string(rn.admin("GET", path, nil, 200))); got != want {
			t.Errorf("GET %s = %s, want %s", path, got, want)
		}
	}
	req, _ := http.NewRequest("GET", rn.url+"/vault", nil)
	req.SetBasicAuth(defaultAdminName, "wrong")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") != `Basic realm="couchdb"` {
		t.Fatalf("wrong password: %d, WWW-Authenticate %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
}

// TestCompressionOffByDefault: E2EE chunk answers do not compress, so the
// relay sends them plain unless the configuration turns gzip on.
func TestCompressionOffByDefault(t *testing.T) {
	get := func(rn *running) string {
		t.Helper()
		// Enough documents that the answer is over the 1 KiB threshold.
		for i := range 40 {
			rn.admin("PUT", fmt.Sprintf("/vault/doc%02d", i), map[string]string{"text": strings.Repeat("x", 64)}, 201)
		}
		req, _ := http.NewRequest("GET", rn.url+"/vault/_all_docs?include_docs=true", nil)
		req.SetBasicAuth(rn.user, rn.pass)
		req.Header.Set("Accept-Encoding", "gzip")
		tr := &http.Transport{DisableCompression: true}
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.Header.Get("Content-Encoding")
	}
	if enc := get(startAdmin(t, t.TempDir())); enc != "" {
		t.Errorf("default relay: Content-Encoding %q, want none", enc)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "relay.toml")
	if err := os.WriteFile(cfg, []byte("compression = true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if enc := get(startAdmin(t, filepath.Join(dir, "data"), "--config", cfg)); enc != "gzip" {
		t.Errorf("compression = true: Content-Encoding %q, want gzip", enc)
	}
}
