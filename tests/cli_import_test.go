package tests

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/livesync-go/livesync-go/engine/docid"
	"github.com/livesync-go/livesync-go/engine/livesync"
)

// testCLIImportPouchDB: "livesync import DIR URL"
// of the vault's input files into an empty database (created by the
// import), plain and with E2EE + obfuscated paths; a real PouchDB 9
// client replicates the database, and the engine decodes its copy back to
// the inputs byte for byte with their mtimes. On the server every chunk
// precedes the metadata naming it. An unreadable file is skipped with a
// warning and a non-zero exit, the others imported; a second import
// changes nothing.
func testCLIImportPouchDB(t *testing.T, c *cliRunner) {
	pouchClient(t)
	v := readVectorVault(t, "e2ee")
	want := dumpInputs(t, v.vaultDump)
	for _, tc := range []struct {
		name, passphrase string
		flags            []string
	}{
		{"plain", "", nil},
		{"e2ee+obfuscation", "cli import passphrase", []string{"--encrypt", "--obfuscate-paths"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := writeInputs(t, v)
			// A broken link: a file that cannot be read, even by root.
			if err := os.Symlink(filepath.Join(src, "gone"), filepath.Join(src, "broken.md")); err != nil {
				t.Fatal(err)
			}
			env := map[string]string{}
			if tc.passphrase != "" {
				env["LIVESYNC_PASSPHRASE"] = tc.passphrase
			}
			name := dbName(t)
			db := openDB(t, couchServer, name, false, nil)
			t.Cleanup(func() { _ = db.Destroy(ctxT(t)) })
			rec := startBulkRecorder(t, c)
			args := append([]string{"import", src, rec.url(name), "--quiet"}, tc.flags...)
			r := c.run(t, t.TempDir(), env, args...)
			c.noSecrets(t, r, tc.passphrase)
			if r.code != 1 || !strings.Contains(r.stderr, "skip broken.md") || !strings.Contains(r.stdout, "imported 9 files") {
				t.Fatalf("import with an unreadable file: exit %d (want 1)\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
			}

			// A real PouchDB 9 client replicates it; the engine decodes
			// the copy back to the inputs.
			copyDocs := pouchReplicate(t, couchServer, name)
			codec := remoteCodec(t, db, tc.passphrase)
			got, metas := decodeDocs(t, copyDocs, codec)
			sameFiles(t, got, want)
			for p, m := range metas {
				if m.MTime != v.times[p][1] {
					t.Errorf("%s: mtime %d, want %d", p, m.MTime, v.times[p][1])
				}
			}
			if tc.passphrase != "" {
				for _, raw := range copyDocs {
					if strings.Contains(string(raw), "Ünïcode") || strings.Contains(string(raw), "_Templates") {
						t.Fatalf("the server holds a plaintext path: %.200s", raw)
					}
				}
			}

			// Chunks before metadata: every metadata document reached
			// the server in a request after the one that stored each of
			// its chunks (CouchDB sorts a request's documents by id, so
			// a shared request would not be enough).
			stored := map[string]bool{}
			for _, req := range rec.requests() {
				var metas []livesync.Meta
				for _, raw := range req {
					d, err := livesync.ParseDoc(raw)
					if err != nil {
						t.Fatal(err)
					}
					if docid.IsChunkID(d.ID()) {
						continue
					}
					if d, err = codec.DecodeRemote(d); err == nil && d.IsFileDoc() {
						m, _ := livesync.ParseMeta(d)
						metas = append(metas, m)
					}
				}
				for _, m := range metas {
					for _, id := range m.Children {
						if !stored[id] {
							t.Errorf("%s was sent before its chunk %s was stored", m.Path, id)
						}
					}
				}
				for _, raw := range req {
					if id := rawID(raw); docid.IsChunkID(id) {
						stored[id] = true
					}
				}
			}
			if len(stored) == 0 {
				t.Fatal("no chunk was recorded on the way to the server")
			}

			// Again: nothing changed, nothing new on the server.
			before, err := db.Info(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			os.Remove(filepath.Join(src, "broken.md"))
			r = c.ok(t, t.TempDir(), env, args...)
			if !strings.Contains(r.stdout, "imported 0 files") || !strings.Contains(r.stdout, "9 unchanged") {
				t.Errorf("second import: %s", r.stdout)
			}
			after, _ := db.Info(ctxT(t))
			if after.DocCount != before.DocCount {
				t.Errorf("a second import changed the document count: %d -> %d", before.DocCount, after.DocCount)
			}
		})
	}
}

// bulkRecorder is a reverse proxy in front of the test server that
// records the documents of every _bulk_docs request, in order.
type bulkRecorder struct {
	srv  *httptest.Server
	user string
	mu   sync.Mutex
	reqs [][]json.RawMessage
}

func startBulkRecorder(t *testing.T, c *cliRunner) *bulkRecorder {
	t.Helper()
	target, err := url.Parse(c.couch.url)
	if err != nil {
		t.Fatal(err)
	}
	rec := &bulkRecorder{user: c.couch.user}
	proxy := httputil.NewSingleHostReverseProxy(target)
	rec.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/_bulk_docs") {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			var b struct {
				Docs []json.RawMessage `json:"docs"`
			}
			_ = json.Unmarshal(body, &b)
			rec.mu.Lock()
			rec.reqs = append(rec.reqs, b.Docs)
			rec.mu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(rec.srv.Close)
	return rec
}

// url is the URL of database name through the recorder, with the user.
func (b *bulkRecorder) url(name string) string {
	return strings.Replace(b.srv.URL, "://", "://"+b.user+"@", 1) + "/" + name
}

func (b *bulkRecorder) requests() [][]json.RawMessage {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([][]json.RawMessage(nil), b.reqs...)
}

// rawID reads the _id of a raw document.
func rawID(raw json.RawMessage) string {
	var d struct {
		ID string `json:"_id"`
	}
	_ = json.Unmarshal(raw, &d)
	return d.ID
}
