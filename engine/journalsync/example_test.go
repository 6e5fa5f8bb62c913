package journalsync_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"slices"
	"strings"
	"sync"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/journal"
	"github.com/livesync-go/livesync-go/engine/journalsync"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/store"
)

// bucket is a journal bucket kept in memory: enough of
// journalsync.Objects for an example (adapters/minio.Bucket is the real
// one).
type bucket struct {
	mu   sync.Mutex
	objs map[string][]byte
}

func (b *bucket) Prefix() string { return "vault/" }
func (b *bucket) ID() string     { return "http://127.0.0.1:9000,bucketvault/,auto" }

func (b *bucket) List(_ context.Context, after string) ([]string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var keys []string
	for k := range b.objs {
		if k > after && journal.IsPackListingCandidate(strings.TrimPrefix(k, b.Prefix())) {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, journal.ComparePackKeys)
	return keys, nil
}

func (b *bucket) Get(_ context.Context, key string) ([]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if o, ok := b.objs[key]; ok {
		return bytes.Clone(o), nil
	}
	return nil, fmt.Errorf("%s: %w", key, engine.ErrNotFound)
}

func (b *bucket) Put(_ context.Context, key string, body []byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.objs[key]; ok {
		return fmt.Errorf("%s: %w", key, journalsync.ErrExists) // create-only
	}
	b.objs[key] = bytes.Clone(body)
	return nil
}

// Two devices share notes through a journal bucket: the laptop sends
// its changes as a pack, the phone receives it and reads the note back.
// A third device fetches a chunk by id through the pack index, without
// receiving the journal.
func Example() {
	ctx := context.Background()
	b := &bucket{objs: map[string][]byte{}}
	codec, err := livesync.New(livesync.Config{})
	if err != nil {
		log.Fatal(err)
	}

	// The laptop writes a note into its local store (chunks, then metadata).
	laptop, _ := store.NewMemory(store.Options{Name: "laptop"})
	defer laptop.Close()
	meta, chunks, _ := codec.FileDocs("Notes/Hello.md", []byte("# Hello\n"), 1700000000000, 1700000000000)
	if err := laptop.PutChunks(ctx, chunks); err != nil {
		log.Fatal(err)
	}
	doc, _ := json.Marshal(meta.Doc())
	if _, err := laptop.Put(ctx, doc); err != nil {
		log.Fatal(err)
	}

	// Sync = receive (nothing yet), then send.
	jl, err := journalsync.New(journalsync.Config{Local: laptop, Remote: b})
	if err != nil {
		log.Fatal(err)
	}
	res, err := jl.Sync(ctx)
	fmt.Println("laptop sent", res.PacksSent, "pack of", res.RecordsSent, "records", err)

	// The phone receives the pack and reads the file.
	phone, _ := store.NewMemory(store.Options{Name: "phone"})
	defer phone.Close()
	jp, _ := journalsync.New(journalsync.Config{Local: phone, Remote: b})
	res, err = jp.Sync(ctx)
	fmt.Println("phone received", res.PacksReceived, "pack,", res.DocsWritten, "document,", res.ChunksReceived, "chunk; sent", res.PacksSent, err)
	raw, _ := phone.Get(ctx, meta.ID, store.GetOptions{})
	d, _ := livesync.ParseDoc(raw)
	m, _ := livesync.ParseMeta(d)
	data, err := livesync.ReadFile(m, func(id string) (string, error) {
		got, err := phone.GetChunks(ctx, []engine.ChunkID{id})
		if err != nil || got[id].ID == "" {
			return "", engine.ErrNotFound
		}
		return got[id].Data, nil
	})
	fmt.Printf("%s: %q %v\n", m.Path, data, err)

	// A tablet fetches the chunk by id (DirectFetch): one listing, one
	// pack download, nothing applied to its store.
	tablet, _ := store.NewMemory(store.Options{Name: "tablet"})
	defer tablet.Close()
	jt, _ := journalsync.New(journalsync.Config{Local: tablet, Remote: b, DirectFetch: true})
	src := jt.ChunkSource()
	got, err := src.FetchChunks(ctx, []engine.ChunkID{meta.Children[0], "h:unknown"})
	fmt.Println("tablet found", len(got.Found), "missing", got.Missing, "requests", jt.Stats().Requests(), err)
	// Output:
	// laptop sent 1 pack of 2 records <nil>
	// phone received 1 pack, 1 document, 1 chunk; sent 0 <nil>
	// Notes/Hello.md: "# Hello\n" <nil>
	// tablet found 1 missing [h:unknown] requests 2 <nil>
}
