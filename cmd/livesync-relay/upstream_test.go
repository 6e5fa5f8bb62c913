package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/minio"
	"github.com/livesync-go/livesync-go/engine"
	ebridge "github.com/livesync-go/livesync-go/engine/bridge"
	"github.com/livesync-go/livesync-go/engine/enginetest"
	"github.com/livesync-go/livesync-go/engine/journalsync"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/negotiate/negotiatetest"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/vault"
)

const (
	testPassphrase = "upstream test passphrase"
	testAdminPW    = "test-admin-password"
)

// startConfigured runs a relay with a configuration file: body (TOML)
// after a data_dir and an admin "admin" whose password is testAdminPW.
func startConfigured(t *testing.T, dir, body string, env map[string]string) *running {
	t.Helper()
	text := fmt.Sprintf("data_dir = %q\n\n[[users]]\nname = \"admin\"\npassword_env = \"TEST_ADMIN_PW\"\nadmin = true\n\n%s", filepath.Join(dir, "data"), body)
	cfg := filepath.Join(dir, "relay.toml")
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	e := map[string]string{"TEST_ADMIN_PW": testAdminPW, "TEST_PASSPHRASE": testPassphrase}
	for k, v := range env {
		e[k] = v
	}
	rn := start(t, []string{"--config", cfg}, e)
	rn.user, rn.pass = "admin", testAdminPW
	return rn
}

// couchUpstream is the TOML of a CouchDB upstream on relay rn's vault.
func couchUpstream(name, rawURL, mode, extra string) string {
	return fmt.Sprintf("[[databases.upstreams]]\nname = %q\nkind = \"couchdb\"\nurl = %q\ndatabase = \"vault\"\nuser = \"admin\"\npassword_env = \"TEST_UPSTREAM_PW\"\nmode = %q\n%s\n",
		name, rawURL, mode, extra)
}

// e2eeVault is the [[databases]] table of an E2EE vault with the test
// passphrase, a short pushed delay and a fast hunt.
const e2eeVault = "[purgatory]\npushed_delay = \"200ms\"\n\n[[databases]]\nname = \"vault\"\npassphrase_env = \"TEST_PASSPHRASE\"\n\n"

// waitUpstream polls /status until the upstream satisfies ok.
func (rn *running) waitUpstream(db, name string, ok func(ebridge.UpstreamStatus) bool) ebridge.UpstreamStatus {
	rn.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var last ebridge.UpstreamStatus
	for time.Now().Before(deadline) {
		for _, u := range rn.status().db(rn.t, db).Upstreams {
			if u.Name == name {
				last = u
				if ok(u) {
					return u
				}
			}
		}
		<-tick.C
	}
	rn.t.Fatalf("upstream %s never reached the expected state; last: %+v", name, last)
	return last
}

func isLive(u ebridge.UpstreamStatus) bool { return u.State == ebridge.StateLive }

// setSalt writes sync parameters with salt into rn's vault, as the
// first client does.
func (rn *running) setSalt(salt []byte) {
	rn.t.Helper()
	rn.admin("PUT", "/vault/_local/obsidian_livesync_sync_parameters", negotiate.NewSyncParameters(salt), 201)
}

// salt reads rn's vault salt.
func (rn *running) salt() []byte {
	rn.t.Helper()
	s, err := negotiate.SaltOf(rn.admin("GET", "/vault/_local/obsidian_livesync_sync_parameters", nil, 200))
	if err != nil {
		rn.t.Fatal(err)
	}
	return s
}

func newSalt(t *testing.T) []byte {
	t.Helper()
	s, err := negotiate.NewSalt(nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func e2eeCodec(t *testing.T, salt []byte) *livesync.Codec {
	t.Helper()
	c, err := livesync.New(livesync.Config{Settings: livesync.Settings{Passphrase: testPassphrase, Encrypt: true, PathObfuscation: true}, Salt: salt})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// rawDoc reads a document as stored.
func (rn *running) rawDoc(id string) livesync.Doc {
	rn.t.Helper()
	d, err := livesync.ParseDoc(rn.admin("GET", "/vault/"+url.PathEscape(id), nil, 200))
	if err != nil {
		rn.t.Fatal(err)
	}
	return d
}

// readNote decodes a note of rn with codec: its text.
func (rn *running) readNote(codec *livesync.Codec, id string) string {
	rn.t.Helper()
	m, err := codec.DecodeRemote(rn.rawDoc(id))
	if err != nil {
		rn.t.Fatal(err)
	}
	meta, err := livesync.ParseMeta(m)
	if err != nil {
		rn.t.Fatal(err)
	}
	var sb strings.Builder
	for _, c := range meta.Children {
		d, err := codec.DecodeRemote(rn.rawDoc(c))
		if err != nil {
			rn.t.Fatal(err)
		}
		ch, err := livesync.ParseChunk(d)
		if err != nil {
			rn.t.Fatal(err)
		}
		sb.WriteString(ch.Data)
	}
	return sb.String()
}

// TestUpstreamCouchForwardsBothWays: a relay bridged to a CouchDB
// upstream (another relay, in-process) with an E2EE vault. The relay
// has no salt, so it adopts the upstream's; then a note written through
// the upstream reaches the relay's clients and one written to the relay
// reaches the upstream, both byte for byte (forwarded as they are).
func TestUpstreamCouchForwardsBothWays(t *testing.T) {
	b := startAdmin(t, t.TempDir())
	salt := newSalt(t)
	b.setSalt(salt)
	codec := e2eeCodec(t, salt)

	a := startConfigured(t, t.TempDir(), e2eeVault+couchUpstream("b", b.url, "sync", ""), map[string]string{"TEST_UPSTREAM_PW": testAdminPW})
	u := a.waitUpstream("vault", "b", isLive)
	if u.Boundary != ebridge.BoundaryForward || u.Kind != kindCouchDB || u.Location != b.url+"/vault" {
		t.Fatalf("upstream: %+v", u)
	}
	if got := a.salt(); !bytes.Equal(got, salt) {
		t.Fatal("the relay did not adopt the upstream's salt")
	}
	if d := a.status().db(t, "vault"); d.Mode != "holdback-decrypt" || d.Hunt == nil || d.Hunt.Limits.MaxInFlight != 5 || d.Hunt.Limits.MaxPerWindow != 30 {
		t.Fatalf("database: mode %s, hunt %+v", d.Mode, d.Hunt)
	}

	meta, chunks := note(t, codec, "From B.md", "written through the upstream\n")
	b.pushDocs("vault", append(chunks, meta)...)
	a.waitInFeed("vault", meta.ID())
	if got := a.readNote(codec, meta.ID()); got != "written through the upstream\n" {
		t.Fatalf("read through the relay: %q", got)
	}
	if !bytes.Equal(mustJSON(a.rawDoc(chunks[0].ID())), mustJSON(b.rawDoc(chunks[0].ID()))) {
		t.Error("a chunk was not forwarded as it is")
	}

	meta2, chunks2 := note(t, codec, "From A.md", "written to the relay\n")
	a.pushDocs("vault", append(chunks2, meta2)...)
	b.waitInFeed("vault", meta2.ID())
	if got := b.readNote(codec, meta2.ID()); got != "written to the relay\n" {
		t.Fatalf("read through the upstream: %q", got)
	}
	u = a.waitUpstream("vault", "b", func(u ebridge.UpstreamStatus) bool { return u.DocsPushed >= 2 })
	if u.DocsPulled < 2 || u.LastSeq == "" || u.PushSeq == "" || u.Lag != 0 || u.LastSuccess == nil || u.Errors != 0 {
		t.Errorf("counters: %+v", u)
	}
}

func mustJSON(d livesync.Doc) []byte {
	b, _ := d.MarshalJSON()
	return b
}

// TestUpstreamCouchReencrypts: the relay and its upstream have different
// salts; with the passphrase the relay re-encrypts at the boundary, so
// each side stores the note encrypted with its own salt.
func TestUpstreamCouchReencrypts(t *testing.T) {
	b := startAdmin(t, t.TempDir())
	saltB, saltA := newSalt(t), newSalt(t)
	b.setSalt(saltB)
	dirA := t.TempDir()
	a := startConfigured(t, dirA, e2eeVault, nil)
	a.setSalt(saltA)
	a.stop()
	a = startConfigured(t, dirA, e2eeVault+couchUpstream("b", b.url, "sync", ""), map[string]string{"TEST_UPSTREAM_PW": testAdminPW})
	if u := a.waitUpstream("vault", "b", isLive); u.Boundary != ebridge.BoundaryReencrypt {
		t.Fatalf("boundary %q", u.Boundary)
	}
	codecA, codecB := e2eeCodec(t, saltA), e2eeCodec(t, saltB)

	meta, chunks := note(t, codecB, "Salted.md", "two salts, one note\n")
	b.pushDocs("vault", append(chunks, meta)...)
	a.waitInFeed("vault", meta.ID())
	if got := a.readNote(codecA, meta.ID()); got != "two salts, one note\n" {
		t.Fatalf("the relay's copy with the relay's salt: %q", got)
	}
	if _, err := codecB.DecodeRemote(a.rawDoc(chunks[0].ID())); err == nil {
		t.Error("the relay's copy decrypts with the upstream's salt: it was not re-encrypted")
	}
	if a.rawDoc(meta.ID()).Rev() != meta.Rev() {
		t.Error("the revision changed at the boundary")
	}

	meta2, chunks2 := note(t, codecA, "Back.md", "and back\n")
	a.pushDocs("vault", append(chunks2, meta2)...)
	b.waitInFeed("vault", meta2.ID())
	if got := b.readNote(codecB, meta2.ID()); got != "and back\n" {
		t.Fatalf("the upstream's copy with its salt: %q", got)
	}
}

// TestUpstreamSaltDiffersWithoutPassphrase: without the passphrase the
// relay cannot bridge an upstream with another salt: state error, with a
// message that says what to configure.
func TestUpstreamSaltDiffersWithoutPassphrase(t *testing.T) {
	b := startAdmin(t, t.TempDir())
	b.setSalt(newSalt(t))
	dirA := t.TempDir()
	plain := "[[databases]]\nname = \"vault\"\n\n"
	a := startConfigured(t, dirA, plain, nil)
	a.setSalt(newSalt(t))
	a.stop()
	a = startConfigured(t, dirA, plain+couchUpstream("b", b.url, "sync", ""), map[string]string{"TEST_UPSTREAM_PW": testAdminPW})
	u := a.waitUpstream("vault", "b", func(u ebridge.UpstreamStatus) bool { return u.State == ebridge.StateError })
	if !strings.Contains(u.LastError, "salt differs") || !strings.Contains(u.LastError, "passphrase_file or passphrase_env") {
		t.Fatalf("last error: %q", u.LastError)
	}
}

// TestUpstreamHuntFetchesFromASource: metadata pushed to the relay
// without its chunks is held; the chunks exist only on a source-only
// upstream; the hunt fetches them (raw: the relay's copy is the
// upstream's, byte for byte) and the note is released.
func TestUpstreamHuntFetchesFromASource(t *testing.T) {
	b := startAdmin(t, t.TempDir())
	salt := newSalt(t)
	b.setSalt(salt)
	codec := e2eeCodec(t, salt)
	a := startConfigured(t, t.TempDir(), e2eeVault+couchUpstream("b", b.url, "source", ""), map[string]string{"TEST_UPSTREAM_PW": testAdminPW})
	a.waitUpstream("vault", "b", isLive)

	meta, chunks := note(t, codec, "Hunted.md", strings.Repeat("hunted across upstreams\n", 400))
	b.pushDocs("vault", chunks...)
	a.pushDocs("vault", meta)
	if held := heldIDs(a.status().db(t, "vault")); !slices.Equal(held, []string{meta.ID()}) {
		t.Fatalf("held: %v", held)
	}
	a.waitInFeed("vault", meta.ID())
	d := a.waitReleased("vault")
	if got := a.readNote(codec, meta.ID()); got != strings.Repeat("hunted across upstreams\n", 400) {
		t.Fatal("the released note does not read")
	}
	for _, c := range chunks {
		if !bytes.Equal(mustJSON(a.rawDoc(c.ID())), mustJSON(b.rawDoc(c.ID()))) {
			t.Fatalf("chunk %s differs from the upstream's", c.ID())
		}
	}
	h := d.Upstreams[0].Hunt
	if h.Requests < 1 || h.Found < 1 || h.Chunks != uint64(len(chunks)) || h.MaxInFlight < 1 || h.MaxInFlight > 5 || h.MaxInWindow > 30 || !h.CanFetch {
		t.Fatalf("hunt source: %+v", h)
	}
	if d.Hunt.Completed < 1 {
		t.Fatalf("hunt: %+v", d.Hunt)
	}
}

// TestUpstreamWrongPasswordAndDownServer: /status and /metrics show an
// upstream with a wrong password (error, a clear message without the
// password) and one whose server is down (backoff, the network error),
// while a working upstream stays live.
func TestUpstreamWrongPasswordAndDownServer(t *testing.T) {
	b := startAdmin(t, t.TempDir())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	cfg := e2eeVault + couchUpstream("good", b.url, "sync", "") +
		"[[databases.upstreams]]\nname = \"wrong\"\nkind = \"couchdb\"\nurl = \"" + strings.Replace(b.url, "127.0.0.1", "localhost", 1) + "\"\ndatabase = \"vault\"\nuser = \"admin\"\npassword_env = \"TEST_WRONG_PW\"\n\n" +
		couchUpstream("down", closed, "source", "")
	const wrong = "not-the-password-123"
	a := startConfigured(t, t.TempDir(), cfg, map[string]string{"TEST_UPSTREAM_PW": testAdminPW, "TEST_WRONG_PW": wrong})
	a.waitUpstream("vault", "good", isLive)
	w := a.waitUpstream("vault", "wrong", func(u ebridge.UpstreamStatus) bool { return u.State == ebridge.StateError })
	if !strings.Contains(w.LastError, "authentication failed") || strings.Contains(w.LastError, wrong) || w.LastErrorAt == nil || w.Errors < 1 {
		t.Fatalf("wrong password: %+v", w)
	}
	dn := a.waitUpstream("vault", "down", func(u ebridge.UpstreamStatus) bool { return u.State == ebridge.StateBackoff })
	if !strings.Contains(dn.LastError, "connection refused") || dn.Hunt.CanFetch {
		t.Fatalf("server down: %+v", dn)
	}
	body := string(a.admin("GET", "/metrics", nil, 200))
	for _, want := range []string{
		`livesync_relay_upstream_up{db="vault",upstream="good"} 1`,
		`livesync_relay_upstream_up{db="vault",upstream="wrong"} 0`,
		`livesync_relay_upstream_state{db="vault",state="error",upstream="wrong"} 1`,
		`livesync_relay_upstream_state{db="vault",state="backoff",upstream="down"} 1`,
		`livesync_relay_upstream_lag{db="vault",upstream="good"} 0`,
		`livesync_relay_hunt_limit{db="vault",limit="max_per_window"} 30`,
		`livesync_relay_hunt_requests_total{db="vault",outcome="found",source="good"} 0`,
		`livesync_relay_upstream_errors_total{db="vault",upstream="wrong"}`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(body, wrong) || strings.Contains(a.out.String(), wrong) || strings.Contains(a.out.String(), testAdminPW) {
		t.Error("a password is in /metrics or the log")
	}
}

// memBucket is an in-memory bucket upstream (enginetest.MemObjects plus
// an in-memory handshake port for the sync parameters and the
// milestone), standing in for S3 in package tests; the S3 server tests
// are in tests/relay_upstream_*_test.go.
type memBucket struct {
	*enginetest.MemObjects
	port *negotiatetest.MemPort
}

var (
	memBucketsMu sync.Mutex
	memBuckets   = map[string]*memBucket{}
)

// memBucketFor registers an in-memory bucket: a bucket upstream whose
// endpoint is "memory.invalid" opens it by name.
func memBucketFor(t *testing.T, name string) *memBucket {
	b := &memBucket{MemObjects: enginetest.NewMemObjects("vault/", "http://memory.invalid,"+name+"vault/,"),
		port: negotiatetest.NewMemPort(true)}
	memBucketsMu.Lock()
	memBuckets[name] = b
	memBucketsMu.Unlock()
	t.Cleanup(func() {
		memBucketsMu.Lock()
		delete(memBuckets, name)
		memBucketsMu.Unlock()
	})
	return b
}

func init() {
	real := openBucket
	openBucket = func(cfg minio.Config, log *slog.Logger) (vault.Remote, error) {
		if cfg.Endpoint == "memory.invalid" {
			memBucketsMu.Lock()
			defer memBucketsMu.Unlock()
			if b := memBuckets[cfg.Bucket]; b != nil {
				return b, nil
			}
			return nil, fmt.Errorf("no memory bucket %q", cfg.Bucket)
		}
		return real(cfg, log)
	}
}

func (m *memBucket) EnsureSyncParameters(ctx context.Context) (negotiate.SyncParameters, error) {
	return negotiate.EnsureSyncParameters(ctx, m.port, false)
}

// The vault.Remote of a journal bucket.
func (m *memBucket) Negotiate() negotiate.Port                 { return m.port }
func (m *memBucket) ChunkRange() negotiate.ChunkRange          { return negotiate.JournalChunkRange }
func (m *memBucket) Endpoint() engine.Endpoint                 { return nil }
func (m *memBucket) Objects() journalsync.Objects              { return m }
func (m *memBucket) Chunks(*livesync.Codec) engine.ChunkSource { return nil }
func (m *memBucket) Reset(context.Context) error               { return engine.ErrUnsupported }
func (m *memBucket) Close() error                              { return nil }

func (m *memBucket) packs() int { return len(m.PackKeys()) }

// device is another device of the vault syncing with a bucket: a
// plaintext local store and its journal.
type device struct {
	t     *testing.T
	st    store.Store
	j     *journalsync.Journal
	codec *livesync.Codec
}

func newDevice(t *testing.T, b *memBucket) *device {
	t.Helper()
	ctx := context.Background()
	p, _ := b.EnsureSyncParameters(ctx)
	salt, _ := p.Salt()
	st, err := store.NewMemory(store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	settings := livesync.Settings{Passphrase: testPassphrase, Encrypt: true, PathObfuscation: true}
	cipher, err := journalsync.CipherFor(settings, salt)
	if err != nil {
		t.Fatal(err)
	}
	j, err := journalsync.New(journalsync.Config{Local: st, Remote: b, Cipher: cipher, Epoch: negotiate.JournalEpoch(p)})
	if err != nil {
		t.Fatal(err)
	}
	codec, err := livesync.New(livesync.Config{Settings: settings})
	if err != nil {
		t.Fatal(err)
	}
	return &device{t: t, st: st, j: j, codec: codec}
}

// write stores a note locally (plaintext, first revisions) and sends it.
func (d *device) write(path, text string) livesync.Meta {
	d.t.Helper()
	ctx := context.Background()
	m, cs, err := d.codec.FileDocs(path, []byte(text), 1700000000000, 1700000000000)
	if err != nil {
		d.t.Fatal(err)
	}
	var chunks []engine.Chunk
	for _, c := range cs {
		chunks = append(chunks, engine.Chunk{ID: c.ID, Data: c.Data})
	}
	if err := d.st.PutChunks(ctx, chunks); err != nil {
		d.t.Fatal(err)
	}
	b, _ := json.Marshal(withRev(m.Doc()))
	if _, err := d.st.BulkDocs(ctx, []json.RawMessage{b}); err != nil {
		d.t.Fatal(err)
	}
	if _, err := d.j.Send(ctx); err != nil {
		d.t.Fatal(err)
	}
	m.Rev = withRev(m.Doc()).Rev()
	return m
}

// read receives and returns a note's text ("" while it is not there).
func (d *device) read(id string) string {
	d.t.Helper()
	ctx := context.Background()
	if _, err := d.j.Receive(ctx); err != nil {
		d.t.Fatal(err)
	}
	raw, err := d.st.Get(ctx, id, store.GetOptions{})
	if err != nil {
		return ""
	}
	doc, _ := livesync.ParseDoc(raw)
	m, err := livesync.ParseMeta(doc)
	if err != nil {
		d.t.Fatal(err)
	}
	got, err := d.st.GetChunks(ctx, m.Children)
	if err != nil {
		d.t.Fatal(err)
	}
	var sb strings.Builder
	for _, c := range m.Children {
		ch, ok := got[c]
		if !ok {
			return ""
		}
		sb.WriteString(ch.Data)
	}
	return sb.String()
}

// pollUntil checks ok every 20 ms until it holds (30 s at most).
func pollUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		<-tick.C
	}
}

// bucketUpstream is the TOML of a bucket upstream on memory bucket name.
func bucketUpstream(name, bucket, mode, extra string) string {
	return fmt.Sprintf("[[databases.upstreams]]\nname = %q\nkind = \"s3\"\nendpoint = \"memory.invalid\"\nbucket = %q\nprefix = \"vault/\"\nmode = %q\npoll_interval = \"50ms\"\n%s\n",
		name, bucket, mode, extra)
}

// TestUpstreamBucketBridges: a relay bridged to a journal bucket (with its
// own salt): a note written to the relay reaches another device of the
// bucket, and a note that device writes reaches the relay's clients, in
// the relay's remote form (encrypted with the relay's salt) — the relay
// never stores plaintext.
func TestUpstreamBucketBridges(t *testing.T) {
	bk := memBucketFor(t, "bridge")
	a := startConfigured(t, t.TempDir(), e2eeVault+bucketUpstream("c", "bridge", "sync", ""), nil)
	u := a.waitUpstream("vault", "c", isLive)
	if u.Boundary != ebridge.BoundaryEncode || u.Kind != kindS3 {
		t.Fatalf("upstream: %+v", u)
	}
	salt := a.salt() // created by the relay for the upstreams to share
	codec := e2eeCodec(t, salt)
	dev := newDevice(t, bk)

	meta, chunks := note(t, codec, "To Bucket.md", "from the relay to the bucket\n")
	a.pushDocs("vault", append(chunks, meta)...)
	pollUntil(t, "the note reaches the bucket's device", func() bool { return dev.read(meta.ID()) == "from the relay to the bucket\n" })

	m := dev.write("From Bucket.md", "from the bucket to the relay\n")
	a.waitInFeed("vault", m.ID)
	if got := a.readNote(codec, m.ID); got != "from the bucket to the relay\n" {
		t.Fatalf("read through the relay: %q", got)
	}
	for _, c := range m.Children {
		d := a.rawDoc(c)
		if string(d["e_"]) != "true" {
			t.Fatalf("chunk %s is stored in plaintext: %v", c, d)
		}
	}
	if a.rawDoc(m.ID).Rev() != m.Rev {
		t.Error("the revision changed at the boundary")
	}
	// Nothing bounces: the relay does not send back what it received,
	// however many times it syncs.
	n := bk.packs()
	t0 := time.Now().Add(200 * time.Millisecond)
	u = a.waitUpstream("vault", "c", func(u ebridge.UpstreamStatus) bool { return u.LastSuccess != nil && u.LastSuccess.After(t0) })
	if got := bk.packs(); got != n || u.DocsPulled == 0 || u.DocsPushed == 0 {
		t.Errorf("packs: %d after the round trip, then %d; %+v", n, got, u)
	}
}

// TestUpstreamHuntSplitAcrossSources is item 2 in-process: a note whose
// chunks are split between a CouchDB upstream and a bucket upstream (both
// source-only, the bucket with direct fetch) is released once the hunt
// fetched both halves.
func TestUpstreamHuntSplitAcrossSources(t *testing.T) {
	b := startAdmin(t, t.TempDir())
	salt := newSalt(t)
	b.setSalt(salt)
	bk := memBucketFor(t, "split")
	codec := e2eeCodec(t, salt)
	a := startConfigured(t, t.TempDir(), e2eeVault+couchUpstream("b", b.url, "source", "")+bucketUpstream("c", "split", "source", "direct_fetch = true"),
		map[string]string{"TEST_UPSTREAM_PW": testAdminPW})
	a.waitUpstream("vault", "b", isLive)
	a.waitUpstream("vault", "c", isLive)

	text := strings.Repeat("split between two upstreams, ", 300)
	meta, chunks := note(t, codec, "Split.md", text)
	if len(chunks) < 2 {
		t.Fatalf("%d chunks", len(chunks))
	}
	half := len(chunks) / 2
	b.pushDocs("vault", chunks[:half]...)
	dev := newDevice(t, bk)
	var plain []engine.Chunk
	for _, c := range chunks[half:] {
		d, err := codec.DecodeRemote(c)
		if err != nil {
			t.Fatal(err)
		}
		ch, _ := livesync.ParseChunk(d)
		plain = append(plain, engine.Chunk{ID: ch.ID, Data: ch.Data})
	}
	if err := dev.st.PutChunks(context.Background(), plain); err != nil {
		t.Fatal(err)
	}
	if _, err := dev.j.Send(context.Background()); err != nil {
		t.Fatal(err)
	}

	a.pushDocs("vault", meta)
	a.waitInFeed("vault", meta.ID())
	d := a.waitReleased("vault")
	if got := a.readNote(codec, meta.ID()); got != text {
		t.Fatal("the released note does not read")
	}
	by := map[string]ebridge.SourceStatus{}
	for _, u := range d.Upstreams {
		by[u.Name] = u.Hunt
	}
	if by["b"].Chunks != uint64(half) || by["c"].Chunks != uint64(len(chunks)-half) {
		t.Fatalf("chunks by source: b %+v, c %+v", by["b"], by["c"])
	}
}

// TestUpstreamSecretsResolve: upstream passwords and secret keys come
// from files or the environment; a missing one is a usage error that
// names its source, not its value.
func TestUpstreamSecretsResolve(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "secret"), []byte("s3-secret\n"), 0o600)
	text := "[[databases]]\nname = \"v\"\npassphrase_env = \"P\"\n" +
		couchUpstream("c", "http://127.0.0.1:5984/", "pull", "chunks_online = true") +
		"[[databases.upstreams]]\nname = \"s\"\nkind = \"s3\"\nendpoint = \"127.0.0.1:9000\"\nbucket = \"bkt\"\naccess_key = \"k\"\nsecret_key_file = \"secret\"\n"
	c, err := parseConfig(text, filepath.Join(dir, "relay.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.validate(); err != nil {
		t.Fatal(err)
	}
	s, err := resolve(c, flagValues{}, envOf(map[string]string{"P": "pp", "TEST_UPSTREAM_PW": "couch-secret"}))
	if err != nil {
		t.Fatal(err)
	}
	ups := s.upstreams["v"]
	if len(ups) != 2 || ups[0].couch.Password != "couch-secret" || ups[0].couch.URL != "http://127.0.0.1:5984" || !ups[0].chunksOnline ||
		ups[1].s3.SecretKey != "s3-secret" || !ups[1].s3.PathStyle || ups[1].pollInterval != defaultPollInterval {
		t.Fatalf("upstreams %+v", ups)
	}
	if ups[0].location() != "http://127.0.0.1:5984/vault" || ups[1].location() != "http://127.0.0.1:9000/bkt/" {
		t.Errorf("locations %q %q", ups[0].location(), ups[1].location())
	}
	_, err = resolve(c, flagValues{}, envOf(map[string]string{"P": "pp"}))
	if _, ok := err.(usageError); !ok || !strings.Contains(err.Error(), "TEST_UPSTREAM_PW") || !strings.Contains(err.Error(), `upstream "c"`) {
		t.Fatalf("missing password: %v", err)
	}
}

// TestUpstreamGetsTheSaltAClientWritesLater: a relay and an upstream
// without any salt forward as they are; when the first client writes the
// vault's salt to the relay, the upstream's session ends and the new
// handshake gives the upstream that salt.
func TestUpstreamGetsTheSaltAClientWritesLater(t *testing.T) {
	b := startAdmin(t, t.TempDir())
	a := startConfigured(t, t.TempDir(), "[[databases]]\nname = \"vault\"\n\n"+couchUpstream("b", b.url, "sync", ""), map[string]string{"TEST_UPSTREAM_PW": testAdminPW})
	a.waitUpstream("vault", "b", isLive)
	if code, _ := b.do("GET", "/vault/_local/obsidian_livesync_sync_parameters", b.user, b.pass, nil); code != 404 {
		t.Fatalf("the upstream has sync parameters before any client: %d", code)
	}
	salt := newSalt(t)
	a.setSalt(salt)
	pollUntil(t, "the upstream has the relay's salt", func() bool {
		code, body := b.do("GET", "/vault/_local/obsidian_livesync_sync_parameters", b.user, b.pass, nil)
		s, _ := negotiate.SaltOf(body)
		return code == 200 && bytes.Equal(s, salt)
	})
	a.waitUpstream("vault", "b", func(u ebridge.UpstreamStatus) bool {
		return u.State == ebridge.StateLive && u.Boundary == ebridge.BoundaryForward
	})
}

// TestUpstreamChunksOnline: a pull with chunks_online brings metadata
// only; the relay holds it as pulled from the upstream (first hunt after
// the pulled delay, on that upstream first) and the hunt fetches its
// chunks there.
func TestUpstreamChunksOnline(t *testing.T) {
	b := startAdmin(t, t.TempDir())
	salt := newSalt(t)
	b.setSalt(salt)
	codec := e2eeCodec(t, salt)
	// A long pushed delay: only the pulled delay can release in time.
	a := startConfigured(t, t.TempDir(), strings.Replace(e2eeVault, `"200ms"`, "\"1h\"\npulled_delay = \"1500ms\"", 1)+couchUpstream("b", b.url, "pull", "chunks_online = true"),
		map[string]string{"TEST_UPSTREAM_PW": testAdminPW})
	a.waitUpstream("vault", "b", isLive)
	meta, chunks := note(t, codec, "Online.md", strings.Repeat("fetched on demand\n", 300))
	b.pushDocs("vault", append(chunks, meta)...)
	var held []heldStatus
	pollUntil(t, "the pulled note is held", func() bool {
		held = a.status().db(t, "vault").Held
		return len(held) == 1
	})
	if held[0].Doc != meta.ID() || held[0].Source != "upstream b" {
		t.Fatalf("held: %+v", held[0])
	}
	a.waitInFeed("vault", meta.ID())
	d := a.waitReleased("vault")
	u := d.Upstreams[0]
	if u.Hunt.Chunks != uint64(len(chunks)) || d.Holdback.Holds != 1 || d.Holdback.Released != 1 || !u.ChunksOnline {
		t.Fatalf("hunt %+v, hold-back %+v", u.Hunt, d.Holdback)
	}
	if u.DocsPulled != 1 {
		t.Errorf("pulled %d documents: chunks were replicated", u.DocsPulled)
	}
}

// A stopped relay with upstreams leaves no goroutine behind (runners,
// live feeds, the journal's wake-up, the hunt).
func TestUpstreamNoGoroutineLeftAfterStop(t *testing.T) {
	b := startAdmin(t, t.TempDir())
	salt := newSalt(t)
	b.setSalt(salt)
	memBucketFor(t, "leak")
	http.DefaultClient.CloseIdleConnections()
	before := runtime.NumGoroutine()
	a := startConfigured(t, t.TempDir(), e2eeVault+couchUpstream("b", b.url, "sync", "")+bucketUpstream("c", "leak", "sync", ""),
		map[string]string{"TEST_UPSTREAM_PW": testAdminPW})
	a.waitUpstream("vault", "b", isLive)
	a.waitUpstream("vault", "c", isLive)
	meta, chunks := note(t, e2eeCodec(t, salt), "Leak.md", "checked\n")
	a.pushDocs("vault", append(chunks, meta)...)
	b.waitInFeed("vault", meta.ID())
	a.admin("GET", "/metrics", nil, 200)
	if code := a.stop(); code != exitOK {
		t.Fatalf("exit %d", code)
	}
	http.DefaultClient.CloseIdleConnections()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines before, %d after:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		runtime.Gosched()
	}
}

// TestUpstreamBucketPlainVaultRefusesEncryptedDocs: a bucket upstream
// declared e2ee = false (no passphrase) bridges a plain vault, and stops
// with a clear error instead of moving an encrypted vault's documents.
func TestUpstreamBucketPlainVaultRefusesEncryptedDocs(t *testing.T) {
	bk := memBucketFor(t, "plain")
	a := startConfigured(t, t.TempDir(), "[[databases]]\nname = \"vault\"\n\n"+bucketUpstream("c", "plain", "sync", "e2ee = false"), nil)
	a.waitUpstream("vault", "c", isLive)
	meta, chunks := note(t, plainCodec(t), "Plain.md", "a plain vault\n")
	a.pushDocs("vault", append(chunks, meta)...)
	pollUntil(t, "the plain note in the bucket", func() bool { return bk.packs() == 1 })

	salt := newSalt(t)
	meta2, chunks2 := note(t, e2eeCodec(t, salt), "Secret.md", "an encrypted vault\n")
	a.pushDocs("vault", append(chunks2, meta2)...)
	u := a.waitUpstream("vault", "c", func(u ebridge.UpstreamStatus) bool { return u.State == ebridge.StateError })
	if !strings.Contains(u.LastError, "e2ee = false") {
		t.Fatalf("last error %q", u.LastError)
	}
	if n := bk.packs(); n != 1 {
		t.Fatalf("%d packs: encrypted documents were sent", n)
	}
}
