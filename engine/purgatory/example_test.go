package purgatory_test

import (
	"context"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/fetch"
	"github.com/livesync-go/livesync-go/engine/hunt"
	"github.com/livesync-go/livesync-go/engine/purgatory"
)

// store is a LocalChunks kept in a map.
type store struct {
	mu sync.Mutex
	m  map[engine.ChunkID]engine.Chunk
}

func (s *store) GetChunks(_ context.Context, ids []engine.ChunkID) (map[engine.ChunkID]engine.Chunk, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[engine.ChunkID]engine.Chunk{}
	for _, id := range ids {
		if c, ok := s.m[id]; ok {
			out[id] = c
		}
	}
	return out, nil
}

func (s *store) PutChunks(_ context.Context, cs []engine.Chunk) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range cs {
		s.m[c.ID] = c
	}
	return nil
}

// remote is a ChunkSource holding some chunks.
type remote struct {
	key    string
	chunks map[engine.ChunkID]string
}

func (r remote) FetchChunks(_ context.Context, ids []engine.ChunkID) (engine.FetchResult, error) {
	var res engine.FetchResult
	for _, id := range ids {
		if d, ok := r.chunks[id]; ok {
			res.Found = append(res.Found, engine.Chunk{ID: id, Data: d})
		} else {
			res.Missing = append(res.Missing, id)
		}
	}
	return res, nil
}
func (r remote) CanFetchDirect() bool { return true }
func (r remote) ThrottleKey() string  { return r.key }

// A note's metadata arrives before its chunks. The purgatory holds it (it
// is not served), the hunt looks for the two chunks on every known
// source — here each of two servers has one — and the note is released
// once both are local.
func Example() {
	local := &store{m: map[engine.ChunkID]engine.Chunk{}}
	released := make(chan string, 1)

	var p *purgatory.Purgatory
	h, err := hunt.New(hunt.Config{}, hunt.Deps{
		Local:       local,
		Claims:      fetch.NewCoordinator(),
		OnDelivered: func(ids []engine.ChunkID) { p.ChunksArrived(ids) },
	})
	if err != nil {
		log.Fatal(err)
	}
	h.AddSource(remote{"home.example:5984", map[engine.ChunkID]string{"h:a": "# Hello\n"}}, nil)
	h.AddSource(remote{"backup.example:443", map[engine.ChunkID]string{"h:b": "world\n"}}, nil)

	p, err = purgatory.New(purgatory.Config{PulledDelay: time.Millisecond}, purgatory.Deps{
		Local:  local,
		Hunter: h,
		// Release verifies (decrypt, size) and materialises the file.
		Release: func(_ context.Context, doc, rev string) error {
			released <- doc + "@" + rev
			return nil
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer func() { p.Close(); h.Close() }()

	out, err := p.Hold(context.Background(), purgatory.Revision{
		Doc: "notes/hello.md", Rev: "1-abc", Chunks: []engine.ChunkID{"h:a", "h:b"},
	}, "home.example:5984")
	fmt.Println(out, err)
	fmt.Println("released", <-released)
	// Output:
	// held <nil>
	// released notes/hello.md@1-abc
}
