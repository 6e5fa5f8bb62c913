package journalsync_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/enginetest"
	"github.com/livesync-go/livesync-go/engine/journalsync"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/store"
)

// Two devices share notes through a journal bucket: the laptop sends
// its changes as a pack, the phone receives it and reads the note back.
// A third device fetches a chunk by id through the pack index, without
// receiving the journal.
func Example() {
	ctx := context.Background()
	// A journal bucket kept in memory (adapters/minio.Bucket is the real one).
	b := enginetest.NewMemObjects("vault/", "http://127.0.0.1:9000,bucketvault/,auto")
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
