package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/replicate"
	"github.com/livesync-go/livesync-go/engine/store"
)

const pouchClientDir = "pouchdb" // tests/pouchdb: replicate.mjs and its lockfile

// pouchClient returns the node binary and the path of replicate.mjs. When
// node or the client's node_modules is missing it fails under CI and
// skips otherwise.
func pouchClient(t *testing.T) (node, script string) {
	t.Helper()
	missing := func(what string) {
		msg := what + " (.ci/run runs npm ci in tests/pouchdb; locally: cd tests/pouchdb && npm ci)"
		if os.Getenv("CI") != "" {
			t.Fatal("PouchDB 9 client not available under CI: " + msg)
		}
		t.Skip("PouchDB 9 client not available: " + msg)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("node is not on PATH")
	}
	if _, err := os.Stat(filepath.Join(pouchClientDir, "node_modules", "pouchdb-node")); err != nil {
		missing("tests/pouchdb/node_modules is missing")
	}
	script, err = filepath.Abs(filepath.Join(pouchClientDir, "replicate.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	return node, script
}

// pouchReplicate runs replicate.mjs: a PouchDB 9 replicate.from of the
// database into a memory PouchDB with LiveSync's settings. It returns the
// copy's documents.
func pouchReplicate(t *testing.T, srv couchFactory, dbName string) []json.RawMessage {
	t.Helper()
	node, script := pouchClient(t)
	e := srv(t)
	out := filepath.Join(t.TempDir(), "copy.json")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script, "--url", e.url, "--db", dbName,
		"--batch-size", "25", "--batches-limit", "25", "--out", out)
	// Credentials through the environment, not argv.
	cmd.Env = append(os.Environ(), "LIVESYNC_TEST_COUCHDB_USER="+e.user, "LIVESYNC_TEST_COUCHDB_PASSWORD="+e.password)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("PouchDB 9 replicate.from failed: %v\n%s", err, stderr.String())
	}
	t.Logf("%s", strings.TrimSpace(stderr.String()))
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var docs []json.RawMessage
	if err := json.Unmarshal(b, &docs); err != nil {
		t.Fatalf("replicate.mjs output: %v", err)
	}
	return docs
}

// enginePushFiles writes files (path → content) as the engine would into a fresh
// local store — FileDocs metadata and chunks — and pushes them through the
// codec's remote transform into db. It returns the push's progress.
func enginePushFiles(t *testing.T, db *couchdb.DB, codec *livesync.Codec, files map[string][]byte, ctime, mtime map[string]int64) replicate.Progress {
	t.Helper()
	ctx := ctxT(t)
	local, err := store.NewMemory(store.Options{Name: "pouchdb-interop-local"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { local.Close() })
	for path, data := range files {
		meta, chunks, err := codec.FileDocs(path, data, ctime[path], mtime[path])
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if err := local.PutChunks(ctx, chunks); err != nil {
			t.Fatal(err)
		}
		b, err := meta.Doc().MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := local.Put(ctx, b); err != nil {
			t.Fatalf("%s: put metadata: %v", path, err)
		}
	}
	r, err := replicate.New(replicate.Config{Local: local, Remote: replicate.Transform(db, codec),
		LocalID: "pouchdb-interop-local", RemoteID: db.Name()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	res, err := r.Push(ctx)
	if err != nil {
		t.Fatalf("push: %v", err)
	}
	if res.Push.WriteFailures > 0 {
		t.Fatalf("push: %d write failures", res.Push.WriteFailures)
	}
	return res.Push
}

// TestPouchDBInteropE2EE pushes the vault's input files from the engine
// into an empty database with E2EE V2 and path obfuscation, lets a real
// PouchDB 9 client replicate it with LiveSync's settings (replicate.from,
// batch_size 25, batches_limit 25, chunks included as with
// readChunksOnline off) into a memory PouchDB, and decodes that copy —
// salt from the server's sync parameters — back to the inputs byte for
// byte.
func TestPouchDBInteropE2EE(t *testing.T) { testPouchDBInteropE2EE(t, couchServer) }

func testPouchDBInteropE2EE(t *testing.T, srv couchFactory) {
	pouchClient(t) // fail or skip before touching the server
	d, files, ctime, mtime := pouchE2EEInputs(t)

	settings, err := livesync.FromTweakValues(livesync.Settings{Passphrase: "pouchdb-interop passphrase"}, d.Settings.Effective)
	if err != nil {
		t.Fatal(err)
	}
	if !settings.Encrypt || !settings.PathObfuscation {
		t.Fatalf("settings lack E2EE or path obfuscation: %+v", settings.TweakValues())
	}
	db := freshDB(t, srv, nil)
	ctx := ctxT(t)
	// The empty database gets a new salt from the handshake, as the plugin
	// would create it.
	salt, _, err := db.Handshake(ctx, couchdb.HandshakeOptions{NodeID: "go-writer", Settings: settings.TweakValues()})
	if err != nil {
		t.Fatal(err)
	}
	codec, err := livesync.New(livesync.Config{Settings: settings, Salt: salt})
	if err != nil {
		t.Fatal(err)
	}
	pushed := enginePushFiles(t, db, codec, files, ctime, mtime)
	info, err := db.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pushed %d documents; the server holds %d", pushed.DocsWritten, info.DocCount)

	copyDocs := pouchReplicate(t, srv, db.Name())
	if int64(len(copyDocs)) != info.DocCount {
		t.Fatalf("the PouchDB copy has %d documents, the server %d", len(copyDocs), info.DocCount)
	}

	// Decode the copy as a reader with its own codec: the salt read from
	// the server's sync parameters by a second handshake.
	salt2, _, err := db.Handshake(ctx, couchdb.HandshakeOptions{NodeID: "go-reader", Settings: settings.TweakValues(),
		Check: negotiate.CheckOptions{DisableCheckingConfigMismatch: true}})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(salt2, salt) {
		t.Fatal("the server's sync parameters hold another salt than the writer used")
	}
	reader, err := livesync.New(livesync.Config{Settings: settings, Salt: salt2})
	if err != nil {
		t.Fatal(err)
	}
	got := pouchDecodeCopy(t, reader, copyDocs, files)
	if len(got) != len(files) {
		t.Errorf("decoded %d files from the PouchDB copy, want %d", len(got), len(files))
	}
	for path, want := range files {
		if g, ok := got[path]; !ok || !bytes.Equal(g, want) {
			t.Errorf("%s: decoded %d bytes (found %v), want the %d input bytes", path, len(g), ok, len(want))
		}
	}
}

// pouchE2EEInputs reads the plugin's E2EE vault dump and returns it with
// its input files (vault path → bytes) and their ctimes and mtimes.
func pouchE2EEInputs(t *testing.T) (d vaultDump, files map[string][]byte, ctime, mtime map[string]int64) {
	b, err := os.ReadFile(filepath.Join(vectors, "vault-dump-e2ee.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	var meta struct {
		Files []struct {
			VaultPath string `json:"vaultPath"`
			CTime     int64  `json:"ctime"`
			MTime     int64  `json:"mtime"`
		} `json:"files"`
	}
	_ = json.Unmarshal(b, &meta)
	files = map[string][]byte{}
	ctime, mtime = map[string]int64{}, map[string]int64{}
	for i, f := range d.Files {
		data := []byte(f.Content)
		if f.Source != "" {
			if data, err = os.ReadFile(filepath.Join(vectors, f.Source)); err != nil {
				t.Fatal(err)
			}
		}
		files[f.VaultPath] = data
		ctime[f.VaultPath], mtime[f.VaultPath] = meta.Files[i].CTime, meta.Files[i].MTime
	}
	if len(files) < 5 {
		t.Fatalf("only %d input files", len(files))
	}
	return d, files, ctime, mtime
}

// pouchDecodeCopy decodes the PouchDB copy with reader (no plaintext
// path of files may be in it) and returns the files it rebuilds.
func pouchDecodeCopy(t *testing.T, reader *livesync.Codec, copyDocs []json.RawMessage, files map[string][]byte) map[string][]byte {
	chunks := map[string]string{}
	var metas []livesync.Meta
	for _, raw := range copyDocs {
		for path := range files {
			if strings.Contains(string(raw), path) && path != "" && len(path) > 6 {
				t.Errorf("the copy holds a plaintext path %q: %.200s", path, raw)
			}
		}
		doc, err := livesync.ParseDoc(raw)
		if err != nil {
			t.Fatal(err)
		}
		if doc, err = reader.DecodeRemote(doc); err != nil {
			t.Fatalf("decode %s: %v", doc.ID(), err)
		}
		if strings.HasPrefix(doc.ID(), "h:") {
			c, err := livesync.ParseChunk(doc)
			if err != nil {
				t.Fatal(err)
			}
			chunks[string(c.ID)] = c.Data
			continue
		}
		if !doc.IsFileDoc() {
			continue
		}
		m, err := livesync.ParseMeta(doc)
		if err != nil {
			t.Fatal(err)
		}
		metas = append(metas, m)
	}
	got := map[string][]byte{}
	for _, m := range metas {
		data, err := livesync.ReadFile(m, func(id string) (string, error) {
			s, ok := chunks[id]
			if !ok {
				return "", engine.ErrNotFound
			}
			return s, nil
		})
		if err != nil {
			t.Fatalf("%s: %v", m.Path, err)
		}
		got[m.Path] = data
	}
	return got
}
