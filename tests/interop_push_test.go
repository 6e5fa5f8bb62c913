package tests

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/replicate"
)

// pushedVault is a database the engine pushed the vectors' input files
// into, with E2EE V2 and path obfuscation.
type pushedVault struct {
	// Name is the database on the test server (destroyed when the test
	// ends).
	Name string
	// Settings are the vault's settings, passphrase included: the vault
	// dump's effective settings (engine/FORMAT.md §5.5 tweak values), which a client
	// needs to decode the database.
	Settings livesync.Settings
	// Inputs are the pushed files: vault path → bytes.
	Inputs map[string][]byte
	// IDs maps each vault path to the (obfuscated) id of its metadata
	// document.
	IDs map[string]string
}

// pushE2EEVault creates an empty database, runs the LiveSync handshake
// (which creates the salt), turns the inputs of vault-dump-e2ee.json
// (engine/testdata/vectors/inputs and vault-extra, at the dump's vault
// paths) into documents in a local store with livesync.Codec.FileDocs, and
// pushes them with replicate.Push through replicate.Transform: E2EE chunks,
// obfuscated paths. A later test (a PouchDB client replicating the
// database) reuses it.
func pushE2EEVault(t *testing.T, srv couchFactory) pushedVault {
	t.Helper()
	d := readVaultDump(t)
	settings := dumpSettings(t, d, d.FixedValues.Passphrase)
	inputs := dumpInputs(t, d)
	db := freshDB(t, srv, nil)
	ctx := ctxT(t)
	salt, _, err := db.Handshake(ctx, couchdb.HandshakeOptions{NodeID: "go-pusher", Settings: settings.TweakValues(), CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	codec, err := livesync.New(livesync.Config{Settings: settings, Salt: salt})
	if err != nil {
		t.Fatal(err)
	}
	st := newMemoryStore(t)
	ids := map[string]string{}
	for _, path := range slices.Sorted(maps.Keys(inputs)) {
		m, chunks, err := codec.FileDocs(path, inputs[path], 1700000000000, 1700000001000)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.PutChunks(ctx, chunks); err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(m.Doc())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Put(ctx, b); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		ids[path] = m.ID
	}
	r, err := replicate.New(replicate.Config{Local: st, Remote: replicate.Transform(db, codec), RemoteID: db.Name()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	res, err := r.Push(ctx)
	if err != nil {
		t.Fatalf("push: %v", err)
	}
	if res.Push.DocsWritten == 0 || res.Push.WriteFailures != 0 {
		t.Fatalf("push: %+v", res.Push)
	}
	return pushedVault{Name: db.Name(), Settings: settings, Inputs: inputs, IDs: ids}
}

// TestInteropPushE2EE (Go side of the push): the engine
// pushes the input files with E2EE and path obfuscation; the server holds
// only ciphertext (no path, no content, every chunk e_); a fresh store
// pulls the database back through a second handshake (same salt) and
// every file decodes to its input byte for byte.
func TestInteropPushE2EE(t *testing.T) { testInteropPushE2EE(t, couchServer) }

func testInteropPushE2EE(t *testing.T, srv couchFactory) {
	v := pushE2EEVault(t, srv)
	d := readVaultDump(t)
	db := openDB(t, srv, v.Name, false, nil)
	ctx := ctxT(t)

	// The same paths, passphrase and settings give the plugin's ids.
	for _, f := range d.Files {
		if v.IDs[f.VaultPath] != f.DocID {
			t.Errorf("%s: pushed as %s, the plugin's id is %s", f.VaultPath, v.IDs[f.VaultPath], f.DocID)
		}
	}

	// What the server holds, read without the transform.
	page, err := db.Changes(ctx, engine.ChangesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var refs []engine.DocRev
	for _, c := range page.Results {
		refs = append(refs, engine.DocRev{ID: c.ID, Rev: c.Revs[0]})
	}
	raws, err := db.BulkGet(ctx, refs)
	if err != nil {
		t.Fatal(err)
	}
	var needles []string // plaintext that must not appear on the server
	for path, data := range v.Inputs {
		needles = append(needles, path)
		if i := strings.LastIndexByte(path, '/'); i >= 0 {
			needles = append(needles, path[i+1:])
		}
		if s := strings.TrimSpace(string(data)); len(s) >= 12 && !bytes.ContainsRune(data, 0) {
			needles = append(needles, s[:12])
		}
	}
	metas, chunks := 0, 0
	for _, raw := range raws {
		doc, err := livesync.ParseDoc(raw)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range needles {
			if strings.Contains(string(raw), n) {
				t.Errorf("%s on the server contains the plaintext %q", doc.ID(), n)
			}
		}
		switch {
		case strings.HasPrefix(doc.ID(), "h:"):
			chunks++
			var c struct {
				E    bool   `json:"e_"`
				Data string `json:"data"`
			}
			_ = json.Unmarshal(raw, &c)
			if !c.E || !strings.HasPrefix(c.Data, "%=") {
				t.Errorf("chunk %s is not E2EE V2 ciphertext (e_ %v, data %.3q…)", doc.ID(), c.E, c.Data)
			}
		case doc.IsFileDoc():
			metas++
			var m struct {
				Path string `json:"path"`
			}
			_ = json.Unmarshal(raw, &m)
			if !strings.HasPrefix(doc.ID(), "f:") || !strings.HasPrefix(m.Path, `/\:`) {
				t.Errorf("metadata %s has a plain id or path (path %.6q…)", doc.ID(), m.Path)
			}
		}
	}
	if metas != len(v.Inputs) || chunks == 0 {
		t.Fatalf("server holds %d metadata documents and %d chunks, want %d and some", metas, chunks, len(v.Inputs))
	}

	// Pull back into a fresh store as another device and decode.
	codec := handshakeCodec(t, db, "go-reader", v.Settings)
	st := newMemoryStore(t)
	pullOnce(t, replicate.Config{Local: st, Remote: replicate.Transform(db, codec), RemoteID: db.Name()})
	sameFiles(t, readLocalFiles(t, st), v.Inputs)

	// The database is a vault the plugin can join: sync parameters with a
	// salt, and a milestone that knows the pusher.
	if _, err := db.GetLocal(ctx, "obsidian_livesync_sync_parameters"); err != nil {
		t.Errorf("sync parameters: %v", err)
	}
	raw, err := db.GetLocal(ctx, "obsydian_livesync_milestone")
	if err != nil {
		t.Fatal(err)
	}
	if m, err := negotiate.ParseMilestone(raw); err != nil || !slices.Contains(m.AcceptedNodes, "go-pusher") {
		t.Errorf("milestone %s (%v) does not accept the pusher", raw, err)
	}
}
