package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/activity"
	"github.com/livesync-go/livesync-go/engine/fetch"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/replicate"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/store/boltstore"
)

// readVaultDump reads engine/testdata/vectors/vault-dump-e2ee.json.
func readVaultDump(t *testing.T) vaultDump {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(vectors, "vault-dump-e2ee.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d vaultDump
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// dumpInputs returns the input files of the dump: vault path → bytes.
func dumpInputs(t *testing.T, d vaultDump) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, f := range d.Files {
		data := []byte(f.Content)
		if f.Source != "" {
			var err error
			if data, err = os.ReadFile(filepath.Join(vectors, f.Source)); err != nil {
				t.Fatal(err)
			}
		}
		out[f.VaultPath] = data
	}
	return out
}

// dumpSettings returns the plugin's effective settings of the dump with
// passphrase.
func dumpSettings(t *testing.T, d vaultDump, passphrase string) livesync.Settings {
	t.Helper()
	s, err := livesync.FromTweakValues(livesync.Settings{Passphrase: passphrase}, d.Settings.Effective)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// loadVaultDump writes the dump's remote documents (new_edits=false) and
// _local documents into a fresh database.
func loadVaultDump(t *testing.T, srv couchFactory, d vaultDump) *couchdb.DB {
	t.Helper()
	db := freshDB(t, srv, nil)
	ctx := ctxT(t)
	var docs []json.RawMessage
	for _, r := range d.Remote.AllDocs {
		docs = append(docs, r.Doc)
	}
	res, err := db.BulkDocs(ctx, docs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Error != "" {
			t.Fatalf("load %s: %s", r.ID, r.Error)
		}
	}
	for _, l := range d.Remote.LocalDocs {
		var head struct {
			ID string `json:"_id"`
		}
		_ = json.Unmarshal(l, &head)
		if err := db.PutLocal(ctx, head.ID[len("_local/"):], l); err != nil {
			t.Fatal(err)
		}
	}
	return db
}

// handshakeCodec runs the LiveSync handshake on db and returns a codec
// for settings with the remote's salt.
func handshakeCodec(t *testing.T, db *couchdb.DB, nodeID string, settings livesync.Settings) *livesync.Codec {
	t.Helper()
	salt, _, err := db.Handshake(ctxT(t), couchdb.HandshakeOptions{NodeID: nodeID, Settings: settings.TweakValues(),
		Check: negotiate.CheckOptions{DisableCheckingConfigMismatch: true}})
	if err != nil {
		t.Fatal(err)
	}
	codec, err := livesync.New(livesync.Config{Settings: settings, Salt: salt})
	if err != nil {
		t.Fatal(err)
	}
	return codec
}

// pullOnce runs one replicate.Pull from remote into local.
func pullOnce(t *testing.T, cfg replicate.Config) replicate.Result {
	t.Helper()
	r, err := replicate.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	res, err := r.Pull(ctxT(t))
	if err != nil {
		t.Fatalf("pull: %v", err)
	}
	return res
}

// localFileMetas returns the file metadata documents of st (winning
// revisions, not deleted), by path.
func localFileMetas(t *testing.T, st store.Store) map[string]livesync.Meta {
	t.Helper()
	ctx := ctxT(t)
	infos, err := st.AllDocs(ctx, store.AllDocsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]livesync.Meta{}
	for _, in := range infos {
		raw, err := st.Get(ctx, in.ID, store.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		doc, err := livesync.ParseDoc(raw)
		if err != nil {
			t.Fatal(err)
		}
		if !doc.IsFileDoc() {
			continue
		}
		m, err := livesync.ParseMeta(doc)
		if err != nil {
			t.Fatal(err)
		}
		if m.Deleted {
			continue
		}
		out[m.Path] = m
	}
	return out
}

// readLocalFiles reconstructs every file of st from the chunks in st.
func readLocalFiles(t *testing.T, st store.Store) map[string][]byte {
	t.Helper()
	ctx := ctxT(t)
	out := map[string][]byte{}
	for path, m := range localFileMetas(t, st) {
		have, err := st.GetChunks(ctx, m.Children)
		if err != nil {
			t.Fatal(err)
		}
		data, err := livesync.ReadFile(m, func(id string) (string, error) {
			c, ok := have[id]
			if !ok {
				return "", engine.ErrNotFound
			}
			return c.Data, nil
		})
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out[path] = data
	}
	return out
}

// sameFiles fails t unless got holds exactly the files of want, byte for
// byte.
func sameFiles(t *testing.T, got, want map[string][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%d files, want %d", len(got), len(want))
	}
	for path, w := range want {
		if g, ok := got[path]; !ok || !bytes.Equal(g, w) {
			t.Errorf("%s: read back %d bytes (found %v), want the %d input bytes", path, len(g), ok, len(w))
		}
	}
}

func newMemoryStore(t *testing.T) store.Store {
	st, err := store.NewMemory(store.Options{Name: "local"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func newBoltStore(t *testing.T) store.Store {
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "vault.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

var stores = []struct {
	name string
	open func(*testing.T) store.Store
}{{"memory", newMemoryStore}, {"bolt", newBoltStore}}

// TestInteropPullE2EE (readChunksOnline off): the plugin's
// E2EE + obfuscated vault dump, loaded into the server, pulled by the
// replicator through the remote transform into a fresh store (memory and
// bbolt), and every input file reconstructed from the local store alone.
func TestInteropPullE2EE(t *testing.T) { testInteropPullE2EE(t, couchServer) }

func testInteropPullE2EE(t *testing.T, srv couchFactory) {
	d := readVaultDump(t)
	db := loadVaultDump(t, srv, d)
	codec := handshakeCodec(t, db, "go-puller", dumpSettings(t, d, d.FixedValues.Passphrase))
	want := dumpInputs(t, d)
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			st := s.open(t)
			res := pullOnce(t, replicate.Config{Local: st, Remote: replicate.Transform(db, codec), RemoteID: db.Name()})
			if res.Pull.DocsWritten != len(d.Remote.AllDocs) {
				t.Errorf("pull wrote %d documents, want the dump's %d", res.Pull.DocsWritten, len(d.Remote.AllDocs))
			}
			sameFiles(t, readLocalFiles(t, st), want)
		})
	}
}

// TestInteropPullChunksOnline (readChunksOnline on): the
// pull brings metadata only; reading each file's children through the
// fetch layer fetches the chunks from the server by id in a few batched
// requests, persists them in the store, and every file reads back byte for
// byte.
func TestInteropPullChunksOnline(t *testing.T) { testInteropPullChunksOnline(t, couchServer) }

func testInteropPullChunksOnline(t *testing.T, srv couchFactory) {
	d := readVaultDump(t)
	db := loadVaultDump(t, srv, d)
	codec := handshakeCodec(t, db, "go-puller", dumpSettings(t, d, d.FixedValues.Passphrase))
	want := dumpInputs(t, d)
	st := newMemoryStore(t)
	ctx := ctxT(t)

	act := activity.New(nil)
	defer act.Close()
	pullOnce(t, replicate.Config{Local: st, Remote: replicate.Transform(db, codec), RemoteID: db.Name(),
		Selector: replicate.ChunksOnlineSelector, Activity: act})

	metas := localFileMetas(t, st)
	if len(metas) != len(want) {
		t.Fatalf("pulled %d file documents, want %d", len(metas), len(want))
	}
	var all []string
	seen := map[string]bool{}
	for _, m := range metas {
		for _, id := range m.Children {
			if !seen[id] {
				seen[id] = true
				all = append(all, id)
			}
		}
	}
	if local, err := st.GetChunks(ctx, all); err != nil || len(local) != 0 {
		t.Fatalf("after a readChunksOnline pull %d of %d chunks are local (err %v), want none", len(local), len(all), err)
	}

	claims := fetch.NewCoordinator()
	f, err := fetch.New(fetch.Config{}, fetch.Deps{Source: db.ChunkSource(codec), Local: st, Activity: act, Claims: claims})
	if err != nil {
		t.Fatal(err)
	}
	layer, err := fetch.NewLayer(fetch.LayerConfig{}, fetch.LayerDeps{Local: st, Activity: act, Claims: claims, Fetcher: f})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { layer.Close(); f.Close(); claims.Close() }()

	// Every file is opened at once, as a vault scan does.
	var mu sync.Mutex
	got := map[string][]byte{}
	var wg sync.WaitGroup
	for path, m := range metas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			data, err := readThroughLayer(ctx, layer, m)
			if err != nil {
				t.Errorf("%s: %v", path, err)
				return
			}
			mu.Lock()
			got[path] = data
			mu.Unlock()
		}()
	}
	wg.Wait()
	sameFiles(t, got, want)

	stats := f.Stats()
	t.Logf("chunks: %d distinct; fetcher: %d requests, %d delivered", len(all), stats.Requests, stats.Delivered)
	if int(stats.Delivered) != len(all) {
		t.Errorf("fetcher delivered %d chunks, want %d", stats.Delivered, len(all))
	}
	// Batched: the fetcher coalesces the concurrent reads into requests of
	// up to 100 ids; one request per chunk would be len(all). Allow one
	// request per 10 chunks at most.
	if limit := len(all) / 10; stats.Requests == 0 || int(stats.Requests) > limit {
		t.Errorf("%d chunk fetch requests for %d chunks, want at most %d", stats.Requests, len(all), limit)
	}
	// The fetched chunks were persisted.
	if local, err := st.GetChunks(ctx, all); err != nil || len(local) != len(all) {
		t.Errorf("after reading, %d of %d chunks are local (err %v)", len(local), len(all), err)
	}
}

// readThroughLayer reads a file's chunks through the fetch layer.
func readThroughLayer(ctx context.Context, layer *fetch.Layer, m livesync.Meta) ([]byte, error) {
	res, err := layer.Get(ctx, m.Children, fetch.ReadOptions{})
	if err != nil {
		return nil, err
	}
	have := map[string]fetch.Result{}
	for i, id := range m.Children {
		have[id] = res[i]
	}
	return livesync.ReadFile(m, func(id string) (string, error) {
		r := have[id]
		if !r.OK {
			return "", r.Err
		}
		return r.Chunk.Data, nil
	})
}
