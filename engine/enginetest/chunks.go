package enginetest

import (
	"context"
	"sync"

	"github.com/livesync-go/livesync-go/engine"
)

// MemChunks is an engine.LocalChunks kept in a map. The zero value is not
// usable; call NewMemChunks. It is safe for concurrent use.
type MemChunks struct {
	mu sync.Mutex
	m  map[engine.ChunkID]engine.Chunk
}

// NewMemChunks returns a MemChunks holding the given chunks.
func NewMemChunks(chunks ...engine.Chunk) *MemChunks {
	s := &MemChunks{m: make(map[engine.ChunkID]engine.Chunk, len(chunks))}
	for _, c := range chunks {
		s.m[c.ID] = c
	}
	return s
}

// GetChunks returns the stored chunks among ids; absent ids are left out.
// A cancelled ctx returns ctx.Err(), as the port's contract allows.
func (s *MemChunks) GetChunks(ctx context.Context, ids []engine.ChunkID) (map[engine.ChunkID]engine.Chunk, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[engine.ChunkID]engine.Chunk, len(ids))
	for _, id := range ids {
		if c, ok := s.m[id]; ok {
			out[id] = c
		}
	}
	return out, nil
}

// PutChunks stores chunks, replacing any with the same id.
func (s *MemChunks) PutChunks(_ context.Context, chunks []engine.Chunk) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range chunks {
		s.m[c.ID] = c
	}
	return nil
}

// Len returns the number of stored chunks.
func (s *MemChunks) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// MapSource is an engine.ChunkSource answering from a map: ids in Chunks
// are Found, all others Missing. It fails only when Err is set.
type MapSource struct {
	Key    string                    // its ThrottleKey
	Chunks map[engine.ChunkID]string // chunk id → data
	Err    error                     // if set, every FetchChunks fails with it
}

// FetchChunks answers every id, found or missing, or fails with Err.
func (s MapSource) FetchChunks(ctx context.Context, ids []engine.ChunkID) (engine.FetchResult, error) {
	if err := ctx.Err(); err != nil {
		return engine.FetchResult{}, err
	}
	if s.Err != nil {
		return engine.FetchResult{}, s.Err
	}
	var res engine.FetchResult
	for _, id := range ids {
		if d, ok := s.Chunks[id]; ok {
			res.Found = append(res.Found, engine.Chunk{ID: id, Data: d})
		} else {
			res.Missing = append(res.Missing, id)
		}
	}
	return res, nil
}

// CanFetchDirect reports true.
func (s MapSource) CanFetchDirect() bool { return true }

// ThrottleKey returns Key.
func (s MapSource) ThrottleKey() string { return s.Key }

// ChunkData returns the chunk reader livesync.ReadFile takes, over
// local's own chunks: a chunk's data, engine.ErrNotFound for one local
// lacks.
func ChunkData(ctx context.Context, local engine.LocalChunks) func(id string) (string, error) {
	return func(id string) (string, error) {
		got, err := local.GetChunks(ctx, []engine.ChunkID{id})
		if err != nil {
			return "", err
		}
		c, ok := got[id]
		if !ok {
			return "", engine.ErrNotFound
		}
		return c.Data, nil
	}
}
