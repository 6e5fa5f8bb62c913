package tests

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/minio"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/e2ee"
	"github.com/livesync-go/livesync-go/engine/journal"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	minioclient "github.com/minio/minio-go/v7"
)

// s3Env is the S3 server named by the environment:
//
//	LIVESYNC_TEST_S3_ENDPOINT        host:port, or http(s)://host:port
//	LIVESYNC_TEST_S3_ACCESS_KEY      a key allowed to create and delete buckets
//	LIVESYNC_TEST_S3_SECRET_KEY
//	LIVESYNC_TEST_S3_BUCKET_PREFIX   optional, default lsgo-test-
//	LIVESYNC_TEST_S3_REGION          optional: the region the server enforces
//	LIVESYNC_TEST_S3_SECURE          optional: 1 for HTTPS with a host:port endpoint
//	LIVESYNC_TEST_S3_CA_FILE         optional: PEM of the server's CA (self-signed TLS)
//	LIVESYNC_TEST_S3_VIRTUAL_DOMAIN  optional: the server serves <bucket>.<domain> as
//	                                 virtual-host style (versitygw --virtual-domain,
//	                                 MinIO MINIO_DOMAIN); tests resolve it to the endpoint
type s3Env struct {
	endpoint, access, secret, bucketPrefix string
	region, virtualDomain                  string
	secure                                 bool
	caPEM                                  []byte
}

// s3Server returns the S3 server named by the environment. Without one it
// fails under CI and skips otherwise.
func s3Server(t *testing.T) s3Env {
	t.Helper()
	e := s3Env{endpoint: os.Getenv("LIVESYNC_TEST_S3_ENDPOINT"), access: os.Getenv("LIVESYNC_TEST_S3_ACCESS_KEY"),
		secret: os.Getenv("LIVESYNC_TEST_S3_SECRET_KEY"), bucketPrefix: os.Getenv("LIVESYNC_TEST_S3_BUCKET_PREFIX"),
		region: os.Getenv("LIVESYNC_TEST_S3_REGION"), virtualDomain: os.Getenv("LIVESYNC_TEST_S3_VIRTUAL_DOMAIN")}
	if e.endpoint == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("LIVESYNC_TEST_S3_ENDPOINT is not set but CI is: the S3 integration tests must run in CI " +
				"(.ci/run starts tests/s3server and sets LIVESYNC_TEST_S3_ENDPOINT, _ACCESS_KEY and _SECRET_KEY)")
		}
		t.Skip("LIVESYNC_TEST_S3_ENDPOINT not set; run tests/run.sh, or see README.md \"Integration tests\"")
	}
	if e.bucketPrefix == "" {
		e.bucketPrefix = "lsgo-test-"
	}
	switch v := os.Getenv("LIVESYNC_TEST_S3_SECURE"); v {
	case "", "0", "false":
	case "1", "true":
		e.secure = true
	default:
		t.Fatalf("LIVESYNC_TEST_S3_SECURE=%q: want 1 or 0", v)
	}
	if strings.HasPrefix(e.endpoint, "https://") {
		e.secure = true
	}
	if f := os.Getenv("LIVESYNC_TEST_S3_CA_FILE"); f != "" {
		pem, err := os.ReadFile(f)
		if err != nil {
			t.Fatalf("LIVESYNC_TEST_S3_CA_FILE: %v", err)
		}
		e.caPEM = pem
	}
	return e
}

// requireS3Setting returns an optional setting that a test needs; without
// it the test fails under CI (tests/s3server sets every one) and skips
// otherwise, saying why.
func requireS3Setting(t *testing.T, value, name, why string) string {
	t.Helper()
	if value == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not set but CI is (tests/s3server sets it): %s", name, why)
		}
		t.Skipf("%s not set: %s", name, why)
	}
	return value
}

// hostPort is the endpoint without its scheme.
func (e s3Env) hostPort() string {
	h := strings.TrimPrefix(strings.TrimPrefix(e.endpoint, "https://"), "http://")
	return strings.TrimSuffix(h, "/")
}

// config is a path-style Config for the server; Region is the server's
// when known, else empty (asked from the server).
func (e s3Env) config(bucket, prefix string) minio.Config {
	cfg := minio.Config{Endpoint: e.endpoint, Secure: e.secure, CACertPEM: e.caPEM, Region: e.region,
		Bucket: bucket, Prefix: prefix, AccessKey: e.access, SecretKey: e.secret, PathStyle: true}
	if strings.HasPrefix(e.endpoint, "http://") {
		cfg.Secure = false
	}
	return cfg
}

// s3Bucket opens a bucket on the test server with cfg adjusted by mod.
func s3Bucket(t *testing.T, e s3Env, bucket, prefix string, mod func(*minio.Config)) *minio.Bucket {
	t.Helper()
	cfg := e.config(bucket, prefix)
	if mod != nil {
		mod(&cfg)
	}
	b, err := minio.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// newBucketName is a fresh bucket name under the test prefix.
func newBucketName(e s3Env) string {
	r := make([]byte, 6)
	_, _ = rand.Read(r)
	return e.bucketPrefix + hex.EncodeToString(r)
}

// freshBucket creates a new bucket and removes it (with its objects) at
// the end of the test; objects go under a per-test prefix.
func freshBucket(t *testing.T) (*minio.Bucket, s3Env) {
	t.Helper()
	e := s3Server(t)
	name := newBucketName(e)
	prefix := strings.ToLower(strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())) + "/"
	b := s3Bucket(t, e, name, prefix, nil)
	ctx := ctxT(t)
	if err := b.Client().MakeBucket(ctx, name, minioclient.MakeBucketOptions{Region: e.region}); err != nil {
		t.Fatalf("make bucket %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		c := b.Client()
		objs := c.ListObjects(ctx, name, minioclient.ListObjectsOptions{Recursive: true})
		for re := range c.RemoveObjects(ctx, name, objs, minioclient.RemoveObjectsOptions{}) {
			t.Logf("remove %s: %v", re.ObjectName, re.Err)
		}
		if err := c.RemoveBucket(ctx, name); err != nil {
			t.Logf("remove bucket %s: %v", name, err)
		}
	})
	return b, e
}

// allObjects lists every object of the bucket (control objects and
// other prefixes included) with the raw client.
func allObjects(t *testing.T, b *minio.Bucket) []string {
	t.Helper()
	var keys []string
	for o := range b.Client().ListObjects(ctxT(t), b.Name(), minioclient.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			t.Fatalf("list %s: %v", b.Name(), o.Err)
		}
		keys = append(keys, o.Key)
	}
	return keys
}

// fastRetry keeps the default attempts but waits 1 ms between them, for
// tests that count attempts on a real server.
func fastRetry(c *minio.Config) {
	c.Retry.Delay = func(int) time.Duration { return time.Millisecond }
}

const vectorsDir = "../engine/testdata/vectors"

// TestS3JournalVectors uploads the journal packs the real plugin wrote
// (plain and E2EE) as they are, lists them, opens every pack (E2EE with the
// salt read back from the sync-parameters object) and rebuilds every input
// file byte for byte.
func TestS3JournalVectors(t *testing.T) {
	var dump s3VectorDump
	raw, err := os.ReadFile(filepath.Join(vectorsDir, "vault-dump-plain.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &dump); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"plain", "e2ee"} {
		t.Run(kind, func(t *testing.T) {
			b, _ := freshBucket(t)
			ctx := ctxT(t)
			dir := filepath.Join(vectorsDir, "journal", kind)
			keys := s3UploadVectors(t, b, dir)
			if _, err := b.GetMilestone(ctx); err != nil {
				t.Fatal(err)
			}
			s := s3VectorSettings(t, dir)
			cipher := s3VectorHandshake(t, b, s)
			chunks, metas := s3ReadVectorPacks(t, b, keys, cipher)
			if len(metas) != len(dump.Files) {
				t.Fatalf("%d files in the journal, want %d", len(metas), len(dump.Files))
			}
			dump.check(t, s, chunks, metas)
		})
	}
}

// s3VectorDump is the part of the plugin's plain vault dump the journal
// vectors are checked against: the input files.
type s3VectorDump struct {
	Files []struct {
		VaultPath string `json:"vaultPath"`
		Source    string `json:"source"`
		Content   string `json:"content"`
		CTime     int64  `json:"ctime"`
		MTime     int64  `json:"mtime"`
		SHA256    string `json:"sha256"`
	} `json:"files"`
}

// s3UploadVectors puts every object of the vectors' dir into b as it
// is, and checks List returns the packs in order, also after a key. It
// returns the pack keys.
func s3UploadVectors(t *testing.T, b *minio.Bucket, dir string) []string {
	ctx := ctxT(t)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var wantPacks []string
	for _, en := range entries {
		name := en.Name()
		if en.IsDir() || name == "manifest.json" {
			continue
		}
		body, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := b.PutObject(ctx, name, body); err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(name, journal.PackKeySuffix) {
			wantPacks = append(wantPacks, b.Prefix()+name)
		}
	}
	keys, err := b.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(keys) != fmt.Sprint(wantPacks) {
		t.Fatalf("List = %v, want %v", keys, wantPacks)
	}
	if after, err := b.List(ctx, keys[0]); err != nil || fmt.Sprint(after) != fmt.Sprint(keys[1:]) {
		t.Fatalf("List after %s = %v, %v; want %v", keys[0], after, err, keys[1:])
	}
	return keys
}

// s3VectorSettings returns the plugin's effective settings from the
// vectors' manifest, with the vectors' passphrase.
func s3VectorSettings(t *testing.T, dir string) livesync.Settings {
	var manifest struct {
		Settings struct {
			Effective negotiate.TweakValues `json:"effective"`
		} `json:"settings"`
	}
	mb, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(mb, &manifest); err != nil {
		t.Fatal(err)
	}
	s, err := livesync.FromTweakValues(livesync.Settings{Passphrase: "vector-passphrase"}, manifest.Settings.Effective)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// s3VectorHandshake checks the handshake accepts the bucket the plugin
// wrote when run with the plugin's settings, and returns the plugin's
// salt; it returns the journal's cipher (nil for a plain vault).
func s3VectorHandshake(t *testing.T, b *minio.Bucket, s livesync.Settings) journal.Cipher {
	ctx := ctxT(t)
	hsSalt, v, err := b.Handshake(ctx, minio.HandshakeOptions{NodeID: "livesync-go", Settings: s.TweakValues()})
	if err != nil || v.Kind != negotiate.VerdictOK {
		t.Fatalf("handshake on the plugin's bucket: %v (verdict %v)", err, v.Kind)
	}
	if !s.Encrypt {
		return nil
	}
	p, err := b.GetSyncParameters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	salt, err := p.Salt()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(hsSalt, salt) {
		t.Fatal("the handshake returned a salt other than the plugin's")
	}
	return e2ee.New(s.Passphrase, salt, e2ee.Options{})
}

// s3ReadVectorPacks opens every pack, checks the same records round
// trip through PutPack and GetPack, and returns the chunks' data by id
// and the file metadata documents by id.
func s3ReadVectorPacks(t *testing.T, b *minio.Bucket, keys []string, cipher journal.Cipher) (map[string]string, map[string]livesync.Doc) {
	ctx := ctxT(t)
	chunks := map[string]string{}
	metas := map[string]livesync.Doc{}
	for _, k := range keys {
		recs, err := b.GetPack(ctx, k, cipher)
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		// Round trip: the same records through PutPack and GetPack.
		rk, err := b.PutPack(ctx, recs, cipher)
		if err != nil {
			t.Fatal(err)
		}
		back, err := b.GetPack(ctx, rk, cipher)
		if err != nil || len(back) != len(recs) {
			t.Fatalf("PutPack/GetPack %s: %d records, %v; want %d", rk, len(back), err, len(recs))
		}
		if _, ok := journal.ParsePackKey(b.Prefix(), rk); !ok {
			t.Fatalf("PutPack key %s is not a pack key", rk)
		}
		for _, r := range recs {
			if r.IsChunk() {
				chunks[r.ID] = r.ChunkData
				continue
			}
			d, err := livesync.ParseDoc(r.Doc)
			if err != nil {
				t.Fatal(err)
			}
			if d.IsFileDoc() {
				metas[d.ID()] = d
			}
		}
	}
	return chunks, metas
}

// check rebuilds every input file from the journal's metadata and
// chunks and compares it with the input byte for byte.
func (dump s3VectorDump) check(t *testing.T, s livesync.Settings, chunks map[string]string, metas map[string]livesync.Doc) {
	get := func(id string) (string, error) {
		if d, ok := chunks[id]; ok {
			return d, nil
		}
		return "", engine.ErrNotFound
	}
	codec, err := livesync.New(livesync.Config{Settings: s})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range dump.Files {
		input := []byte(f.Content)
		if f.Content == "" && f.Source != "" {
			if input, err = os.ReadFile(filepath.Join(vectorsDir, f.Source)); err != nil {
				t.Fatal(err)
			}
		}
		// The metadata id the plugin derives from the path (plain or
		// obfuscated), as the engine computes it.
		want, _, err := codec.FileDocs(f.VaultPath, input, f.CTime, f.MTime)
		if err != nil {
			t.Fatal(err)
		}
		doc, ok := metas[want.ID]
		if !ok {
			t.Fatalf("%s: %s not in the journal", f.VaultPath, want.ID)
		}
		m, err := livesync.ParseMeta(doc)
		if err != nil {
			t.Fatal(err)
		}
		got, err := livesync.ReadFile(m, get)
		if err != nil {
			t.Fatalf("%s: %v", f.VaultPath, err)
		}
		sum := sha256.Sum256(got)
		if hex.EncodeToString(sum[:]) != f.SHA256 {
			t.Errorf("%s: rebuilt bytes differ from the input", f.VaultPath)
		}
	}
}

// TestS3ListPagination lists more objects than one S3 page (1,000) holds,
// from the start and from a key in the middle, leaving out control
// objects ("_" names) and objects of another prefix in the same bucket.
func TestS3ListPagination(t *testing.T) {
	t.Parallel()
	b, e := freshBucket(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const n = 1100
	const t0 = 1700000000000
	other := s3Bucket(t, e, b.Name(), "other-vault/", nil)
	sem := make(chan struct{}, 16)
	errc := make(chan error, n+2)
	for i := range n {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			errc <- b.Put(ctx, journal.PackKey(b.Prefix(), int64(t0+i)), []byte{byte(i)})
		}()
	}
	go func() { errc <- b.PutMilestone(ctx, []byte(`{}`)) }()
	go func() { errc <- other.Put(ctx, journal.PackKey(other.Prefix(), t0+5000), []byte("x")) }()
	for range n + 2 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	check := func(keys []string, from int) {
		t.Helper()
		if len(keys) != n-from {
			t.Fatalf("List returned %d keys, want %d", len(keys), n-from)
		}
		for i, k := range keys {
			ms, ok := journal.ParsePackKey(b.Prefix(), k)
			if !ok || ms != int64(t0+from+i) {
				t.Fatalf("keys[%d] = %s, want the pack of %d", i, k, t0+from+i)
			}
		}
	}
	all, err := b.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	check(all, 0)
	const mid = 550
	after, err := b.List(ctx, all[mid-1])
	if err != nil {
		t.Fatal(err)
	}
	check(after, mid)
	if last, err := b.List(ctx, all[n-1]); err != nil || len(last) != 0 {
		t.Fatalf("List after the last key = %d keys, %v; want none", len(last), err)
	}
}

// TestS3WrongSecret checks that bad credentials give an auth error with a
// clear message, and that a failed sync-parameters read writes no salt.
func TestS3WrongSecret(t *testing.T) {
	good, e := freshBucket(t)
	ctx := ctxT(t)
	bucket := good.Name()
	bad := s3Bucket(t, e, bucket, good.Prefix(), func(c *minio.Config) { c.SecretKey = "wrong-" + e.secret })

	for name, f := range map[string]func() error{
		"list":            func() error { _, err := bad.List(ctx, ""); return err },
		"get pack":        func() error { _, err := bad.GetPack(ctx, good.Prefix()+"1-docs.jsonl.gz", nil); return err },
		"sync parameters": func() error { _, err := bad.EnsureSyncParameters(ctx); return err },
	} {
		err := f()
		var ee *engine.Error
		if !errors.As(err, &ee) || ee.Stage != engine.StageAuth {
			t.Fatalf("%s with a wrong secret: %v, want an auth-stage *engine.Error", name, err)
		}
		if !strings.Contains(err.Error(), "credentials") {
			t.Errorf("%s: message %q does not point at the credentials", name, err)
		}
		if strings.Contains(err.Error(), e.secret) {
			t.Errorf("%s: message contains the secret key", name)
		}
	}
	if _, err := good.GetSyncParameters(ctx); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("after a failed read the sync parameters exist or cannot be read: %v", err)
	}
	// Proven absent: a salt is written once and then kept.
	p1, err := good.EnsureSyncParameters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := p1.Salt(); err != nil || len(s) != 32 {
		t.Fatalf("salt %v, %v", s, err)
	}
	p2, err := good.EnsureSyncParameters(ctx)
	if err != nil || p2.PBKDF2Salt != p1.PBKDF2Salt {
		t.Fatalf("second Ensure: %v, %v; want the same salt", p2, err)
	}
	// A missing bucket is not proof that the object is absent.
	gone := s3Bucket(t, e, bucket+"-missing", good.Prefix(), nil)
	if _, err := gone.EnsureSyncParameters(ctx); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("missing bucket: %v, want ErrNotFound", err)
	}
	if _, err := gone.GetSyncParameters(ctx); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("missing bucket after Ensure: %v", err)
	}
	// Unreachable server: transport error.
	down := s3Bucket(t, s3Env{endpoint: "127.0.0.1:1", access: e.access, secret: e.secret, region: e.region}, bucket, good.Prefix(), fastRetry)
	dctx, dcancel := context.WithTimeout(ctx, 5*time.Second)
	defer dcancel()
	if _, err := down.EnsureSyncParameters(dctx); func() bool {
		var ee *engine.Error
		return !errors.As(err, &ee) || ee.Stage != engine.StageTransport
	}() || !strings.Contains(err.Error(), "gave up after 4 attempts") {
		t.Fatalf("unreachable server: %v, want a transport-stage error after 4 attempts", err)
	}
}
