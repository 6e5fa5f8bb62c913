package replicate_test

import (
	"context"
	"encoding/json"
	"testing"
	"testing/synctest"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/activity"
	"github.com/livesync-go/livesync-go/engine/enginetest"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/purgatory"
	"github.com/livesync-go/livesync-go/engine/replicate"
	"github.com/livesync-go/livesync-go/engine/store"
)

// TestReadChunksOnlineIntoStoreAndPurgatory wires the real pieces: a
// remote memory store holding an encrypted vault (through Transform), a
// readChunksOnline pull into a local memory store that leaves chunks out,
// the purgatory holding every pulled note because its chunks are not
// local, and a second pull without the selector delivering the chunks,
// which releases every note with the bytes it was written with.
func TestReadChunksOnlineIntoStoreAndPurgatory(t *testing.T) {
	synctest.Test(t, testReadChunksOnline)
}

func testReadChunksOnline(t *testing.T) {
	ctx := context.Background()
	codec, err := livesync.New(livesync.Config{
		Settings: livesync.Settings{Encrypt: true, Passphrase: "replicate-test", PathObfuscation: true},
		Salt:     make([]byte, 32),
	})
	if err != nil {
		t.Fatal(err)
	}
	remoteStore, err := store.NewMemory(store.Options{Name: "remote"})
	if err != nil {
		t.Fatal(err)
	}
	defer remoteStore.Close()
	remote := replicate.Transform(remoteStore, codec)

	files := map[string]string{
		"notes/a.md":   "# A\n\nfirst note\n",
		"notes/b.md":   "# B\n\nsecond note, a bit longer than the first one\n",
		"Daily/ü 1.md": "ünïcödé\n",
	}
	writeFiles(t, remote, codec, files)

	local, err := store.NewMemory(store.Options{Name: "local"})
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	releasedDocs := map[string]bool{}
	p, err := purgatory.New(purgatory.Config{}, purgatory.Deps{
		Local: local,
		Release: func(ctx context.Context, doc, rev string) error {
			m, data, err := readFile(ctx, local, doc, rev)
			if err != nil {
				return err
			}
			if string(data) != files[m.Path] {
				t.Errorf("%s released with different bytes", m.Path)
			}
			releasedDocs[m.Path] = true
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	act := activity.New(nil)

	pull := func(selector json.RawMessage) {
		t.Helper()
		r, err := replicate.New(replicate.Config{
			Local: local, Remote: remote, Selector: selector,
			Holder: p, HoldSource: "remote:5984", Arrivals: p, Activity: act,
		})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if _, err := r.Pull(ctx); err != nil {
			t.Fatal(err)
		}
	}

	pull(replicate.ChunksOnlineSelector)
	if held := p.Held(); len(held) != len(files) {
		t.Fatalf("after the metadata-only pull %d notes are held, want %d", len(held), len(files))
	}
	if len(releasedDocs) != 0 {
		t.Fatal("a note was released before its chunks were local")
	}

	pull(nil)
	synctest.Wait() // the purgatory's driver releases asynchronously
	if held := p.Held(); len(held) != 0 {
		t.Fatalf("%d notes still held after their chunks arrived", len(held))
	}
	if len(releasedDocs) != len(files) {
		t.Errorf("released %v, want every file", releasedDocs)
	}
}

// writeFiles writes files (path -> content) to remote as the plugin
// would: each file's chunks, then its metadata.
func writeFiles(t *testing.T, remote engine.Endpoint, codec *livesync.Codec, files map[string]string) {
	t.Helper()
	for path, content := range files {
		meta, chunks, err := codec.FileDocs(path, []byte(content), 1, 2)
		if err != nil {
			t.Fatal(err)
		}
		var docs []json.RawMessage
		for _, c := range chunks {
			d := livesync.ChunkDoc(c)
			d["_rev"] = json.RawMessage(`"1-aaaa"`)
			b, _ := d.MarshalJSON()
			docs = append(docs, b)
		}
		m := meta.Doc()
		m["_rev"] = json.RawMessage(`"1-bbbb"`)
		b, _ := m.MarshalJSON()
		docs = append(docs, b)
		if _, err := remote.BulkDocs(context.Background(), docs); err != nil {
			t.Fatal(err)
		}
	}
}

// readFile reads revision rev of metadata document doc from st and the
// file it describes.
func readFile(ctx context.Context, st store.Store, doc, rev string) (livesync.Meta, []byte, error) {
	raw, err := st.Get(ctx, doc, store.GetOptions{Rev: rev})
	if err != nil {
		return livesync.Meta{}, nil, err
	}
	d, err := livesync.ParseDoc(raw)
	if err != nil {
		return livesync.Meta{}, nil, err
	}
	m, err := livesync.ParseMeta(d)
	if err != nil {
		return livesync.Meta{}, nil, err
	}
	data, err := livesync.ReadFile(m, enginetest.ChunkData(ctx, st))
	return m, data, err
}
