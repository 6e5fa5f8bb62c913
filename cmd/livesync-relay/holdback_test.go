package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/engine/holdback"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/purgatory"
)

// startAdmin starts a relay with an admin from the environment.
func startAdmin(t *testing.T, dir string, args ...string) *running {
	t.Helper()
	env := map[string]string{envAdminPassword: "test-admin-password"}
	rn := start(t, append([]string{"--data-dir", dir}, args...), env)
	rn.user, rn.pass = defaultAdminName, env[envAdminPassword]
	return rn
}

// waitInFeed waits, with longpolls on the changes feed (no sleeps),
// until id is in the database's feed.
func (rn *running) waitInFeed(db, id string) {
	rn.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var c struct {
			Results []struct {
				ID string `json:"id"`
			} `json:"results"`
			LastSeq json.RawMessage `json:"last_seq"`
		}
		json.Unmarshal(rn.admin("GET", "/"+db+"/_changes", nil, 200), &c)
		for _, r := range c.Results {
			if r.ID == id {
				return
			}
		}
		var since string
		json.Unmarshal(c.LastSeq, &since)
		rn.admin("GET", "/"+db+"/_changes?feed=longpoll&timeout=5000&since="+since, nil, 200)
	}
	rn.t.Fatalf("%s never appeared in %s's changes feed", id, db)
}

// waitReleased waits until /status lists nothing held in db. The
// purgatory drops a document from its list just after the release is
// written, so a client can see the document in the feed a moment before
// /status stops listing it. It polls /status, without sleeps.
func (rn *running) waitReleased(db string) dbStatus {
	rn.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		d := rn.status().db(rn.t, db)
		if len(d.Held) == 0 {
			return d
		}
		if time.Now().After(deadline) {
			rn.t.Fatalf("still held: %v", heldIDs(d))
		}
		runtime.Gosched()
	}
}

func heldIDs(d dbStatus) []string {
	ids := []string{}
	for _, h := range d.Held {
		ids = append(ids, h.Doc)
	}
	return ids
}

// "/status JSON shape with a held document (push metadata without chunks
// via HTTP _bulk_docs new_edits=false, see it in /status, then push the
// chunk and see it released and visible in _changes)".
func TestStatusShowsAHeldDocumentUntilItsChunksArrive(t *testing.T) {
	rn := startAdmin(t, t.TempDir())
	meta, chunks := note(t, plainCodec(t), "Notes/Held.md", "# Held\nuntil its chunk arrives\n")
	id := livesync.Doc(meta).ID()
	rn.pushDocs("vault", meta)

	st := rn.status()
	d := st.db(t, "vault")
	if st.Server != "livesync-relay" || st.URL != rn.url || st.UUID == "" || d.Mode != string(holdback.ModeReadable) || d.PassphraseConfigured {
		t.Fatalf("/status: %+v", st)
	}
	if len(d.Held) != 1 {
		t.Fatalf("held: %+v", d.Held)
	}
	h := d.Held[0]
	if h.Doc != id || h.MissingChunks != len(chunks) || h.State != "active" || h.Reason != purgatory.ReasonMissing ||
		h.Source != "client push" || len(h.Revisions) != 1 || h.Since.IsZero() || !h.Deadline.After(h.Since) {
		t.Fatalf("held document: %+v", h)
	}
	if d.Holdback.HeldRevisions != 1 || d.Holdback.Holds != 1 || d.Purgatory.Active != 1 || d.StoreBytes <= 0 {
		t.Fatalf("counters: %+v %+v size %d", d.Holdback, d.Purgatory, d.StoreBytes)
	}
	if slices.Contains(rn.changedIDs("vault"), id) {
		t.Fatal("a held document is in _changes")
	}
	if code, _ := rn.do("GET", "/vault/"+url.PathEscape(id), rn.user, rn.pass, nil); code != 404 {
		t.Fatalf("GET of a held document: %d, want 404", code)
	}

	rn.pushDocs("vault", chunks...)
	rn.waitInFeed("vault", id)
	d = rn.waitReleased("vault")
	if d.Holdback.Released != 1 || d.Purgatory.Releases != 1 {
		t.Fatalf("after the chunks: %+v", d)
	}
	rn.admin("GET", "/vault/"+url.PathEscape(id), nil, 200)

	// The raw shape, as a monitoring script reads it.
	var raw map[string]any
	json.Unmarshal(rn.admin("GET", "/status", nil, 200), &raw)
	for _, k := range []string{"server", "couchdb_version", "uuid", "url", "started", "uptime_seconds", "replication_clients", "databases"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("/status lacks %q", k)
		}
	}
	db0 := raw["databases"].([]any)[0].(map[string]any)
	for _, k := range []string{"name", "mode", "mode_explained", "passphrase_configured", "store_bytes", "held", "holdback", "purgatory"} {
		if _, ok := db0[k]; !ok {
			t.Errorf("/status database lacks %q", k)
		}
	}
}

// "graceful shutdown persists the hold (restart from the same data dir:
// still held, then released by a chunk push)".
func TestRestartKeepsTheHold(t *testing.T) {
	dir := t.TempDir()
	rn := startAdmin(t, dir)
	meta, chunks := note(t, plainCodec(t), "Restart.md", "held across a restart\n")
	id := livesync.Doc(meta).ID()
	rn.pushDocs("vault", meta)
	if got := heldIDs(rn.status().db(t, "vault")); !slices.Equal(got, []string{id}) {
		t.Fatalf("held before the restart: %v", got)
	}
	if code := rn.stop(); code != exitOK {
		t.Fatalf("exit %d:\n%s", code, rn.out)
	}

	rn2 := startAdmin(t, dir)
	d := rn2.status().db(t, "vault")
	if got := heldIDs(d); !slices.Equal(got, []string{id}) {
		t.Fatalf("held after the restart: %v\n%s", got, rn2.out)
	}
	if !strings.Contains(rn2.out.String(), "held documents resumed") {
		t.Errorf("the restart does not say it resumed held documents:\n%s", rn2.out)
	}
	if slices.Contains(rn2.changedIDs("vault"), id) {
		t.Fatal("the held document is served after the restart")
	}
	rn2.pushDocs("vault", chunks...)
	rn2.waitInFeed("vault", id)
	rn2.waitReleased("vault")
}

// "/healthz, /metrics and /status: /healthz open; /metrics and /status
// require admin credentials unless metrics_public = true".
func TestOperationsEndpointsAccess(t *testing.T) {
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "alice.password")
	os.WriteFile(pwFile, []byte("alice-password\n"), 0o600)
	cfg := filepath.Join(dir, "relay.toml")
	write := func(extra string) {
		os.WriteFile(cfg, []byte(extra+`
[[users]]
name = "alice"
password_file = "alice.password"
databases = ["vault"]
`), 0o600)
	}
	write("")
	rn := startAdmin(t, filepath.Join(dir, "data"), "--config", cfg)
	for _, path := range []string{"/metrics", "/status"} {
		if code, _ := rn.do("GET", path, "", "", nil); code != 401 {
			t.Errorf("%s without credentials: %d, want 401", path, code)
		}
		if code, _ := rn.do("GET", path, rn.user, "wrong", nil); code != 401 {
			t.Errorf("%s with a wrong password: %d, want 401", path, code)
		}
		if code, _ := rn.do("GET", path, "alice", "alice-password", nil); code != 403 {
			t.Errorf("%s as a non-admin: %d, want 403", path, code)
		}
		rn.admin("GET", path, nil, 200)
	}
	// The session cookie of the CouchDB API works too.
	req, _ := http.NewRequest("POST", rn.url+"/_session", strings.NewReader(fmt.Sprintf(`{"name":%q,"password":%q}`, rn.user, rn.pass)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	req, _ = http.NewRequest("GET", rn.url+"/status", nil)
	for _, c := range resp.Cookies() {
		req.AddCookie(c)
	}
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("/status with the admin's session cookie: %d", resp.StatusCode)
	}
	rn.stop()

	write("metrics_public = true\n")
	rn = startAdmin(t, filepath.Join(dir, "data"), "--config", cfg)
	for _, path := range []string{"/metrics", "/status", "/healthz"} {
		if code, _ := rn.do("GET", path, "", "", nil); code != 200 {
			t.Errorf("%s public: %d", path, code)
		}
	}
	if code, _ := rn.do("GET", "/vault", "", "", nil); code != 401 {
		t.Errorf("metrics_public opened the databases: %d", code)
	}
}

// "/metrics contains the named metric families after some requests";
// the route label is the pattern, not the path.
func TestMetrics(t *testing.T) {
	rn := startAdmin(t, t.TempDir())
	meta, _ := note(t, plainCodec(t), "Metrics.md", "counted\n")
	rn.pushDocs("vault", meta)
	rn.changedIDs("vault")
	rn.do("GET", "/vault/no-such-doc", rn.user, rn.pass, nil)
	rn.do("GET", "/healthz", "", "", nil)

	// A live feed is a replication client while it is open: the gauge is
	// up once the answer's headers have arrived.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", rn.url+"/vault/_changes?feed=continuous&since=now&heartbeat=10000", nil)
	req.SetBasicAuth(rn.user, rn.pass)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()

	text := string(rn.admin("GET", "/metrics", nil, 200))
	for _, want := range []string{
		`livesync_relay_http_requests_total{code="201",route="/{db}/_bulk_docs"} 1`,
		`livesync_relay_http_requests_total{code="200",route="/{db}/_changes"} 1`,
		`livesync_relay_http_requests_total{code="404",route="/{db}/{docid}"} 1`,
		`livesync_relay_http_requests_total{code="200",route="/healthz"} 1`,
		`livesync_relay_http_request_duration_seconds_bucket{route="/{db}/_bulk_docs",le=`,
		`livesync_relay_replication_clients{feed="continuous"} 1`,
		`livesync_relay_replication_clients{feed="longpoll"} 0`,
		`livesync_relay_held_documents{db="vault",state="active"} 1`,
		`livesync_relay_held_documents{db="vault",state="soft_expired"} 0`,
		`livesync_relay_held_revisions{db="vault"} 1`,
		`livesync_relay_holdback_revisions_total{db="vault",outcome="held"} 1`,
		`livesync_relay_holdback_save_errors_total{db="vault"} 0`,
		`livesync_relay_purgatory_events_total{db="vault",event="release"} 0`,
		`livesync_relay_purgatory_remembered_revisions{db="vault"} 0`,
		`livesync_relay_holdback_mode{db="vault",mode="holdback"} 1`,
		`livesync_relay_store_size_bytes{db="vault"} `,
		`go_goroutines `,
		`process_open_fds `,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(text, `route="/vault`) {
		t.Error("a route label holds a raw path")
	}
	if s := rn.status(); s.ReplicationClients != 1 {
		t.Errorf("/status replication_clients %d, want 1", s.ReplicationClients)
	}
}

// "graceful shutdown that drains feeds": an open continuous feed ends
// when the relay stops, and the exit is clean.
func TestShutdownEndsFeeds(t *testing.T) {
	rn := startAdmin(t, t.TempDir())
	req, _ := http.NewRequest("GET", rn.url+"/vault/_changes?feed=continuous&since=now&heartbeat=60000", nil)
	req.SetBasicAuth(rn.user, rn.pass)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	ended := make(chan string, 1)
	go func() {
		var last string
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if l := strings.TrimSpace(sc.Text()); l != "" {
				last = l
			}
		}
		ended <- last
	}()
	start := time.Now()
	if code := rn.stop(); code != exitOK {
		t.Fatalf("exit %d", code)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the shutdown took %v with a feed open", d)
	}
	select {
	case last := <-ended:
		if !strings.Contains(last, "last_seq") {
			t.Errorf("the feed ended without its last_seq line: %q", last)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the feed is still open after the shutdown")
	}
	if !strings.Contains(rn.out.String(), "held documents saved") {
		t.Errorf("the shutdown log:\n%s", rn.out)
	}
}

// With the vault passphrase configured, the hold-back decrypts
// obfuscated metadata once the first client wrote the vault's salt;
// without it, such metadata passes unheld.
func TestPassphraseEnablesDecryptModeWhenTheSaltArrives(t *testing.T) {
	const passphrase = "vault passphrase for the test"
	salt := make([]byte, 32)
	for i := range salt {
		salt[i] = byte(i * 7)
	}
	codec, err := livesync.New(livesync.Config{Settings: livesync.Settings{Encrypt: true, PathObfuscation: true, Passphrase: passphrase}, Salt: salt})
	if err != nil {
		t.Fatal(err)
	}
	params, _ := json.Marshal(negotiate.NewSyncParameters(salt))
	meta, chunks := note(t, codec, "Secret/Plan.md", "obfuscated path, encrypted chunks\n")
	id := livesync.Doc(meta).ID()
	if !strings.HasPrefix(id, "f:") {
		t.Fatalf("not an obfuscated id: %s", id)
	}

	t.Run("with the passphrase", func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "vault.passphrase"), []byte(passphrase+"\n"), 0o600)
		cfg := filepath.Join(dir, "relay.toml")
		os.WriteFile(cfg, []byte("[[databases]]\nname = \"vault\"\npassphrase_file = \"vault.passphrase\"\n"), 0o600)
		rn := startAdmin(t, filepath.Join(dir, "data"), "--config", cfg)
		d := rn.status().db(t, "vault")
		if d.Mode != string(holdback.ModeReadable) || !d.PassphraseConfigured || !strings.Contains(d.ModeExplained, "no salt yet") {
			t.Fatalf("before the salt: %+v", d)
		}
		rn.admin("PUT", "/vault/_local/obsidian_livesync_sync_parameters", string(params), 201)
		if d = rn.status().db(t, "vault"); d.Mode != string(holdback.ModeDecrypt) {
			t.Fatalf("after the salt: mode %q", d.Mode)
		}
		rn.pushDocs("vault", meta)
		if got := heldIDs(rn.status().db(t, "vault")); !slices.Equal(got, []string{id}) {
			t.Fatalf("held: %v", got)
		}
		rn.pushDocs("vault", chunks...)
		rn.waitInFeed("vault", id)
		rn.stop()
		if strings.Contains(rn.out.String(), passphrase) {
			t.Fatal("the passphrase is in the output")
		}

		// A restart builds the codec at once from the stored salt.
		rn = startAdmin(t, filepath.Join(dir, "data"), "--config", cfg)
		if d = rn.status().db(t, "vault"); d.Mode != string(holdback.ModeDecrypt) {
			t.Fatalf("after a restart: mode %q", d.Mode)
		}
	})
	t.Run("without it", func(t *testing.T) {
		rn := startAdmin(t, t.TempDir())
		rn.admin("PUT", "/vault/_local/obsidian_livesync_sync_parameters", string(params), 201)
		rn.pushDocs("vault", meta)
		d := rn.status().db(t, "vault")
		if d.Mode != string(holdback.ModePassthroughObfuscated) || len(d.Held) != 0 || d.Holdback.Unreadable != 1 {
			t.Fatalf("without a passphrase: %+v", d)
		}
		if !slices.Contains(rn.changedIDs("vault"), id) {
			t.Fatal("the obfuscated metadata is not served")
		}
	})
}
