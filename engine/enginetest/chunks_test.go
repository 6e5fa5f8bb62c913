package enginetest

import (
	"context"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
)

func TestMemChunksAndMapSource(t *testing.T) {
	ctx := context.Background()
	s := NewMemChunks(engine.Chunk{ID: "h:a", Data: "A"})
	if err := s.PutChunks(ctx, []engine.Chunk{{ID: "h:b", Data: "B"}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetChunks(ctx, []engine.ChunkID{"h:a", "h:b", "h:c"})
	if err != nil || len(got) != 2 || got["h:b"].Data != "B" || s.Len() != 2 {
		t.Fatalf("GetChunks = %v, %v", got, err)
	}
	src := MapSource{Key: "k", Chunks: map[engine.ChunkID]string{"h:a": "A"}}
	res, err := src.FetchChunks(ctx, []engine.ChunkID{"h:a", "h:z"})
	if err != nil || len(res.Found) != 1 || res.Found[0].Data != "A" || len(res.Missing) != 1 || res.Missing[0] != "h:z" {
		t.Fatalf("FetchChunks = %+v, %v", res, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := src.FetchChunks(cctx, []engine.ChunkID{"h:a"}); err == nil {
		t.Fatal("a cancelled context was answered")
	}
}
