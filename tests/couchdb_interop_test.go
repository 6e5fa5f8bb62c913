package tests

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
)

const vectors = "../engine/testdata/vectors"

type vaultDump struct {
	Settings struct {
		Effective negotiate.TweakValues `json:"effective"`
	} `json:"settings"`
	FixedValues struct {
		Passphrase       string `json:"passphrase"`
		PBKDF2SaltBase64 string `json:"pbkdf2SaltBase64"`
		NodeID           string `json:"nodeId"`
	} `json:"fixedValues"`
	Files []struct {
		VaultPath string `json:"vaultPath"`
		Source    string `json:"source"`
		Content   string `json:"content"`
		DocID     string `json:"docId"`
	} `json:"files"`
	Remote struct {
		AllDocs []struct {
			ID  string          `json:"id"`
			Doc json.RawMessage `json:"doc"`
		} `json:"allDocs"`
		LocalDocs []json.RawMessage `json:"localDocs"`
	} `json:"remote"`
}

// TestInteropVaultDumpE2EE loads the remote documents the real plugin
// produced (E2EE V2 + path obfuscation) into a fresh database with
// new_edits=false, then reads every file back through the adapter: the
// salt from the sync parameters, metadata by changes + bulk get, chunks
// fetched by id, decoded by livesync.Codec, compared byte for byte.
func TestInteropVaultDumpE2EE(t *testing.T) { testInteropVaultDumpE2EE(t, couchServer) }

func testInteropVaultDumpE2EE(t *testing.T, srv couchFactory) {
	d := readVaultDump(t)
	db := loadVaultDump(t, srv, d)
	ctx := ctxT(t)

	// The handshake reads the plugin's sync parameters: same salt.
	settings, err := livesync.FromTweakValues(livesync.Settings{Passphrase: d.FixedValues.Passphrase}, d.Settings.Effective)
	if err != nil {
		t.Fatal(err)
	}
	salt, _, err := db.Handshake(ctx, couchdb.HandshakeOptions{NodeID: "go-reader", Settings: settings.TweakValues(),
		Check: negotiate.CheckOptions{DisableCheckingConfigMismatch: true}})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := base64.StdEncoding.DecodeString(d.FixedValues.PBKDF2SaltBase64)
	if !bytes.Equal(salt, want) {
		t.Fatal("handshake salt differs from the plugin's")
	}
	codec, err := livesync.New(livesync.Config{Settings: settings, Salt: salt})
	if err != nil {
		t.Fatal(err)
	}
	chunks := db.ChunkSource(codec)

	// Metadata through the replication calls, readChunksOnline-style.
	page, err := db.Changes(ctx, engine.ChangesRequest{Selector: json.RawMessage(`{"type":{"$ne":"leaf"}}`)})
	if err != nil {
		t.Fatal(err)
	}
	var refs []engine.DocRev
	for _, c := range page.Results {
		refs = append(refs, engine.DocRev{ID: c.ID, Rev: c.Revs[0]})
	}
	got, err := db.BulkGet(ctx, refs)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, raw := range got {
		doc, err := livesync.ParseDoc(raw)
		if err != nil {
			t.Fatal(err)
		}
		if doc, err = codec.DecodeRemote(doc); err != nil {
			t.Fatal(err)
		}
		if !doc.IsFileDoc() {
			continue
		}
		meta, err := livesync.ParseMeta(doc)
		if err != nil {
			t.Fatal(err)
		}
		// Fetch the file's chunks by id, at most 100 per request.
		have := map[string]string{}
		var ids []string
		for _, id := range meta.Children {
			if _, dup := have[id]; !dup && !containsID(ids, id) {
				ids = append(ids, id)
			}
		}
		for len(ids) > 0 {
			n := min(len(ids), couchdb.MaxChunkKeys)
			r, err := chunks.FetchChunks(ctx, ids[:n])
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Missing) > 0 {
				t.Fatalf("%s: chunks missing on the server: %v", meta.Path, r.Missing)
			}
			for _, c := range r.Found {
				have[c.ID] = c.Data
			}
			ids = ids[n:]
		}
		data, err := livesync.ReadFile(meta, func(id string) (string, error) {
			s, ok := have[id]
			if !ok {
				return "", engine.ErrNotFound
			}
			return s, nil
		})
		if err != nil {
			t.Fatalf("%s: %v", meta.Path, err)
		}
		files[meta.Path] = data
	}
	if len(files) != len(d.Files) {
		t.Fatalf("read %d files, want %d", len(files), len(d.Files))
	}
	for _, f := range d.Files {
		want := []byte(f.Content)
		if f.Source != "" {
			if want, err = os.ReadFile(filepath.Join(vectors, f.Source)); err != nil {
				t.Fatal(err)
			}
		}
		if got, ok := files[f.VaultPath]; !ok || !bytes.Equal(got, want) {
			t.Errorf("%s: read back %d bytes (found %v), want the %d input bytes", f.VaultPath, len(got), ok, len(want))
		}
	}
}

func containsID(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

func TestChunkSourceFoundMissing(t *testing.T) { testChunkSourceFoundMissing(t, couchServer) }

func testChunkSourceFoundMissing(t *testing.T, srv couchFactory) {
	db := freshDB(t, srv, nil)
	ctx := ctxT(t)
	seed(t, db)
	// A deleted chunk counts as missing.
	if _, err := db.BulkDocs(ctx, []json.RawMessage{raw(`{"_id":"h:chunk2","_rev":"2-d","_deleted":true,"_revisions":{"start":2,"ids":["d","c2"]}}`)}); err != nil {
		t.Fatal(err)
	}
	src := db.ChunkSource(nil)
	r, err := src.FetchChunks(ctx, []string{"h:chunk1", "h:nope", "h:chunk2", "h:chunk0"})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Found) != 2 || r.Found[0].ID != "h:chunk1" || r.Found[0].Data != "piece 1" || r.Found[1].ID != "h:chunk0" {
		t.Fatalf("found %+v", r.Found)
	}
	if len(r.Missing) != 2 || r.Missing[0] != "h:nope" || r.Missing[1] != "h:chunk2" {
		t.Fatalf("missing %v", r.Missing)
	}
	if !src.CanFetchDirect() || src.ThrottleKey() == "" {
		t.Fatal("CanFetchDirect or ThrottleKey")
	}
	if _, err := src.FetchChunks(ctx, make([]string, 101)); err == nil {
		t.Fatal("101 ids accepted")
	}
	local := openDB(t, srv, db.Name(), false, func(c *couchdb.Config) { c.LocalChunksOnly = true })
	if local.ChunkSource(nil).CanFetchDirect() {
		t.Fatal("LocalChunksOnly still fetches direct")
	}
}
